// Drive Conch with the official TypeScript MCP SDK: stdio (spawns `conch serve`) or
// Streamable HTTP (an already running `conch serve --http`).
//   node conch_client.mjs stdio <python> <data-dir>
//   node conch_client.mjs http <url of /mcp>
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

function check(cond, what) {
  if (!cond) {
    console.error("FAILED: " + what);
    process.exit(1);
  }
}

const [mode, a, b] = process.argv.slice(2);
let transport;
if (mode === "stdio") {
  transport = new StdioClientTransport({
    command: a,
    args: ["-m", "conch", "serve", "--data-dir", b],
    env: { ...process.env },
    stderr: "inherit",
  });
} else if (mode === "http") {
  transport = new StreamableHTTPClientTransport(new URL(a));
} else {
  console.error("usage: conch_client.mjs stdio PYTHON DATA_DIR | http URL");
  process.exit(2);
}

const client = new Client({ name: "conch-ts-test", version: "1.0.0" });
await client.connect(transport);
try {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  check(names.includes("exec") && names.includes("read"), "tools listed: " + names);
  const exec = tools.find((t) => t.name === "exec");
  check(exec.outputSchema && exec.outputSchema.type === "object", "exec has an outputSchema");
  check(exec.annotations && exec.annotations.readOnlyHint === false, "exec annotations");

  const r = await client.callTool({ name: "exec", arguments: { command: "echo from-ts; exit 2" } });
  check(!r.isError, "exec is not an error");
  const s = r.structuredContent;
  check(s && s.state === "exited" && s.exit_code === 2, "exec result " + JSON.stringify(s));
  check(s.output === "from-ts\n", "exec output");
  check(r.content[0].type === "text" && r.content[0].text.includes("exited 2"), "text block");

  const bad = await client.callTool({ name: "exec", arguments: { bogus: 1 } });
  check(bad.isError === true && bad.structuredContent.error.code === "invalid_argument",
    "invalid arguments give isError");

  const res = await client.readResource({ uri: "conch://jobs" });
  check(res.contents[0].text.includes(s.job_id), "overview resource lists the job");
  console.log(JSON.stringify({ ok: true, mode, tools: names.length, job_id: s.job_id }));
} finally {
  await client.close();
}

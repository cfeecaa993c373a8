"""Tool sets for ``bench/agent_tasks.py``: how a policy uses each one (its natural use).

Every method is a generator: it yields :class:`Call` s and is sent the text the host showed the
model for each, and returns what it parsed *from that text* (an :class:`Out`). Nothing here
looks at files or processes: a policy knows only what it was shown.

- :class:`ConchTools` (profile ``conch``): ``exec`` with ``yield_ms``/``ready``/``pty``;
  ``read`` with ``until`` (``exit``, a pattern, ``input``) and ``job_ids`` for several jobs,
  so waiting is one call (capped by Conch under the host's timeout; the policy reads again
  while the job runs); ``write``; ``signal``; ``shell_open`` + ``exec shell_id``.
- :class:`CodexTools` (Codex's ``exec_command``/``write_stdin``, built in or Conch's
  ``codex`` profile): a command yields after ``yield_time_ms`` (at most 30 s) with a session
  id; empty ``write_stdin`` polls wait up to 300 s (returning at the exit); background jobs that
  must be stopped or typed into run with ``tty: true`` (Ctrl-C is ``\\u0003``); several jobs:
  polled in turn, 5 s each. No persistent shell: cwd/env are set again in each command.
- :class:`ClaudeTools` (Claude Code's ``Bash``/``TaskOutput``/``TaskStop``, built in or
  Conch's ``claude-code`` profile): ``Bash`` with ``timeout`` up to 600 s, or
  ``run_in_background``; ``TaskOutput block`` waits up to 600 s for the end (no pattern wait:
  polled with 5 s blocks); several jobs: 2 s blocks in turn, or a task notification; no stdin
  at all; cwd/env set again in each command.
- :class:`TfbashTools` (tfbash-mcp 0.2.0): persistent shells, ``shell_exec`` (yield up to
  60 s), ``shell_read`` (``wait_ms`` up to 60 s), ``shell_write``, ``shell_signal``; one
  active execution per shell, so parallel jobs need a shell each.
- :class:`AiDeviceBashTools` (ai-device-bash 0.2.0): ``bash`` with ``timeout`` (then the job
  goes to the background with a pid), ``get {pid, timeout}``; no stdin to a running job; stop
  with ``kill``.
- :class:`ShellServerTools` (mcp-shell-server): ``shell_execute {command: [argv], timeout}``
  only: background jobs through ``nohup … &`` and a log file, waits by ``sleep``/polling.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from agent_tasks_hosts import Call

G = Generator[Call, str, Any]


@dataclass
class Out:
    """What a policy read from one result: the program's output, whether it still runs, its
    exit code, and a handle to follow it (job id, session id, task id)."""

    text: str
    running: bool = False
    exit_code: int | None = None
    handle: str | None = None
    error: str | None = None
    #: Conch: the one-time page where a person types an awaited secret (``secret_page``)
    page: str | None = None
    #: Conch: the digest the result carried (``digest``: the lines that say what went wrong)
    digest: Any = None


class ToolSet:
    name = "?"
    host = "?"
    server: str | None = None  # the MCP server the tools belong to (None: built in)
    pty = False  # can type into a running program
    secret = False  # a secret can be entered without the model (by the person)
    max_wait_s = 600.0  # the longest single wait call (the host's cap or the tool's)
    cumulative = False  # a wait shows the whole output so far (not what is new)
    start_input = False  # ``start`` takes the first input for the program (``text``)
    digests = False  # results carry a digest of a long output (the lines that failed)
    #: the model does not know the failures' shape: it runs a command as it is and reads the
    #: host's own window of it (tasks 12-14)
    plain = False
    #: ``run`` waits as long as a wait call may (Conch's exec waits up to the host's horizon,
    #: like a read), so a long job is run and waited on rather than started and then waited on
    long_run = False

    def call(self, name: str, **args: Any) -> Call:
        return Call(name, args, self.server)

    # every op is a generator; subclasses implement them
    def run(self, cmd: str, wait_s: float = 120) -> G:
        raise NotImplementedError
        yield

    def start(
        self, cmd: str, tty: bool = False, ready_port: int | None = None, text: str | None = None
    ) -> G:
        """Start ``cmd`` in the background; ``text``: its first input, where ``start_input``
        (else ignored: the policy writes it)."""
        raise NotImplementedError
        yield

    def wait(
        self, h: Out, until: str = "exit", pattern: str | None = None, wait_s: float = 60
    ) -> G:
        raise NotImplementedError
        yield

    def wait_any(self, hs: list[Out], wait_s: float = 60) -> G:
        raise NotImplementedError
        yield

    def write(self, h: Out, text: str) -> G:
        raise NotImplementedError
        yield

    def stop(self, h: Out) -> G:
        raise NotImplementedError
        yield

    def shell(self) -> G:
        """A persistent shell if the tool set has one (Out.handle), else Out(handle=None) at
        no cost."""
        return Out("", handle=None)
        yield

    def sh(self, sh: Out, cmd: str, state: list[str]) -> G:
        """``cmd`` in the persistent shell, or with ``state`` (the earlier cd/export steps)
        set again first where there is none."""
        full = cmd if sh.handle else " && ".join([*state, cmd])
        return (yield from self.run(full))


def _json_after_prefix(text: str) -> Any:
    """Conch's structuredContent as the host showed it: Codex prefixes ``Wall time: …
    Output:\\n``, Claude Code shows the JSON itself; an error shows as text in Claude Code."""
    i = text.find("{")
    if i < 0:
        return {"error": text}
    try:
        return json.loads(text[i:])
    except ValueError:
        return {"error": text}


class ConchTools(ToolSet):
    pty = True
    start_input = True  # exec's stdin, kept open (stdin_open) for later writes
    digests = True
    long_run = True

    def __init__(self, host: str, secret: bool = False) -> None:
        self.host = host
        self.name = f"conch@{host}"
        self.server = "conch"
        self.secret = secret
        self.max_wait_s = 600  # one read waits up to 10 minutes; Conch ends it before the host

    def _out(self, text: str) -> Out:
        d = _json_after_prefix(text)
        if "error" in d:
            err = d["error"]
            return Out("", error=err if isinstance(err, str) else json.dumps(err))
        return Out(
            d.get("output", ""),
            running=d.get("state") == "running",
            exit_code=d.get("exit_code"),
            handle=d.get("job_id") or d.get("shell_id"),
            page=d.get("secret_page"),
            digest=d.get("digest"),
        )

    def _follow(self, out: Out, wait_s: float) -> G:
        """Read until the job ends, each read as long as Conch allows (a read the host cut
        at its own timeout is read again: the job runs on)."""
        text, waited = out.text, 0.0
        while out.running and waited < wait_s:
            r = self._out(
                (yield self.call("read", job_id=out.handle, until="exit", wait_ms=600000))
            )
            waited += 30  # give up after wait_s / 30 reads at the least
            text += r.text
            if r.error and _HOST_CUT.search(r.error):
                continue
            out = Out(text, r.running, r.exit_code, out.handle, r.error, digest=r.digest)
            if r.error:
                break
        return out

    def run(self, cmd: str, wait_s: float = 120) -> G:
        out = self._out((yield self.call("exec", command=cmd, yield_ms=600000)))
        if out.error and _HOST_CUT.search(out.error):
            # the host cut the call at its own timeout: the next result names the job Conch
            # kept running (``detached``); a list is the cheapest next result
            listed = _json_after_prefix((yield self.call("list", state="running")))
            found = _JOB_ID.search(str(listed.get("detached", "")))
            if found is None:
                return out
            out = Out("", True, None, found.group(0))
        return (yield from self._follow(out, wait_s))

    def start(
        self, cmd: str, tty: bool = False, ready_port: int | None = None, text: str | None = None
    ) -> G:
        args: dict[str, Any] = {"command": cmd, "yield_ms": 1000}
        if tty:
            args["pty"] = True
        if text is not None:
            args |= {"stdin": text, "stdin_open": True}
        if ready_port:
            args |= {"ready": {"port": ready_port}, "yield_ms": 30000}
        return self._out((yield self.call("exec", **args)))

    def wait(
        self,
        h: Out,
        until: str = "exit",
        pattern: str | None = None,
        wait_s: float = 60,
        say: str | None = None,
    ) -> G:
        cond: Any = {"pattern": pattern} if until == "pattern" else until
        text, waited = "", 0.0
        while True:
            args = {"job_id": h.handle, "until": cond, "wait_ms": int(min(wait_s, 600) * 1000)}
            r = self._out((yield Call("read", args, self.server, say)))
            say = None  # (said once)
            text += r.text
            waited += min(wait_s, 30)  # give up after wait_s / 30 reads at the least
            done = not r.running or (until == "pattern" and re.search(pattern or "", text))
            if until == "change" or until == "input" or done or waited >= wait_s or r.error:
                return Out(text, r.running, r.exit_code, h.handle, r.error)

    def wait_any(self, hs: list[Out], wait_s: float = 60) -> G:
        ids = [h.handle for h in hs]
        r = self._out(
            (yield self.call("read", job_ids=ids, until="exit", wait_ms=int(wait_s * 1000)))
        )
        return r

    def write(self, h: Out, text: str) -> G:
        r = self._out((yield self.call("write", job_id=h.handle, text=text)))
        r.handle = r.handle or h.handle
        return r

    def stop(self, h: Out) -> G:
        return self._out((yield self.call("signal", job_id=h.handle)))

    def shell(self) -> G:
        """A name, no call: exec's ``shell_id`` opens a shell of a new name on first use."""
        return Out("", handle="work")
        yield

    def sh(self, sh: Out, cmd: str, state: list[str]) -> G:
        out = self._out((yield self.call("exec", command=cmd, shell_id=sh.handle, yield_ms=600000)))
        return (yield from self._follow(out, 120))


#: a host's own timeout, as the model sees it (Codex: "timed out awaiting tools/call after
#: 60s"; Claude Code: "… timed out after 60s", "Request timed out")
_HOST_CUT = re.compile(r"timed out", re.I)
_JOB_ID = re.compile(r"\bj_[0-9a-f]{10}\b")


_CODEX_STATE = re.compile(r"Process (?:exited with code (-?\d+)|running with session ID (\d+))")


class CodexTools(ToolSet):
    """Codex's exec_command/write_stdin: built in (server None) or Conch's codex profile."""

    pty = True

    def __init__(self, server: str | None, tool_timeout_s: float = 60, plain: bool = False) -> None:
        self.host = "codex"
        self.server = server
        self.name = "codex built-in" if server is None else "conch --profile codex"
        self.plain = plain
        # an MCP tool call dies at the host's tool timeout; Conch's profile yields before it
        self.mcp_cap = tool_timeout_s if server else None

    def _out(self, text: str, handle: str | None = None) -> Out:
        m = _CODEX_STATE.search(text)
        if m is None:
            return Out("", handle=handle, error=text[:500])
        i = text.find("Output:\n", m.end())
        body = text[i + len("Output:\n") :] if i >= 0 else ""
        if m.group(1) is not None:
            return Out(body, False, int(m.group(1)), handle)
        return Out(body, True, None, m.group(2))

    def _poll_ms(self, want_s: float) -> int:
        return int(max(5, min(want_s, 300)) * 1000)

    def _follow(self, out: Out, wait_s: float) -> G:
        text, waited = out.text, 0.0
        while out.running and waited < wait_s:
            ms = self._poll_ms(wait_s - waited)
            r = self._out(
                (
                    yield self.call(
                        "write_stdin", session_id=int(out.handle or 0), chars="", yield_time_ms=ms
                    )
                ),
                out.handle,
            )
            waited += ms / 1000 if self.mcp_cap is None else min(ms / 1000, self.mcp_cap)
            text += r.text
            out = Out(text, r.running, r.exit_code, out.handle, r.error)
            if r.error:
                break
        return out

    def run(self, cmd: str, wait_s: float = 120) -> G:
        out = self._out((yield self.call("exec_command", cmd=cmd, yield_time_ms=30000)))
        return (yield from self._follow(out, wait_s))

    def start(
        self, cmd: str, tty: bool = False, ready_port: int | None = None, text: str | None = None
    ) -> G:
        # tty, so that it can be stopped with Ctrl-C or typed into
        return self._out((yield self.call("exec_command", cmd=cmd, tty=True, yield_time_ms=1000)))

    def wait(
        self, h: Out, until: str = "exit", pattern: str | None = None, wait_s: float = 60
    ) -> G:
        if until == "exit":
            return (yield from self._follow(Out("", True, None, h.handle), wait_s))
        text, waited = "", 0.0
        while waited < wait_s:
            ms = 5000 if until in ("pattern", "input") else self._poll_ms(wait_s)
            r = self._out(
                (
                    yield self.call(
                        "write_stdin", session_id=int(h.handle or 0), chars="", yield_time_ms=ms
                    )
                ),
                h.handle,
            )
            text += r.text
            waited += ms / 1000
            if not r.running or r.error or until in ("change", "input"):
                return Out(text, r.running, r.exit_code, h.handle, r.error)
            if until == "pattern" and re.search(pattern or "", text):
                return Out(text, True, None, h.handle)
        return Out(text, True, None, h.handle)

    def wait_any(self, hs: list[Out], wait_s: float = 60) -> G:
        waited = 0.0
        while waited < wait_s:
            for h in hs:
                r = self._out(
                    (
                        yield self.call(
                            "write_stdin",
                            session_id=int(h.handle or 0),
                            chars="",
                            yield_time_ms=5000,
                        )
                    ),
                    h.handle,
                )
                waited += 5
                if not r.running:
                    return r
        return Out("", True)

    def write(self, h: Out, text: str) -> G:
        r = self._out(
            (
                yield self.call(
                    "write_stdin", session_id=int(h.handle or 0), chars=text, yield_time_ms=1000
                )
            ),
            h.handle,
        )
        return r

    def stop(self, h: Out) -> G:
        return (yield from self.write(h, "\u0003"))


_TASK_ID = re.compile(r"Command running in background with ID: (\w+)")
_TAG = re.compile(r"<(\w+)>\n?(.*?)\n?</\1>", re.S)


class ClaudeTools(ToolSet):
    """Claude Code's Bash/TaskOutput/TaskStop: built in (server None) or the claude-code
    profile."""

    cumulative = True

    def __init__(self, server: str | None, plain: bool = False) -> None:
        self.host = "claude"
        self.server = server
        self.name = "claude built-in" if server is None else "conch --profile claude-code"
        self.plain = plain

    def _bash(self, text: str) -> Out:
        m = _TASK_ID.search(text)
        if m:
            return Out("", True, None, m.group(1))
        e = re.match(r"Exit code (-?\d+)\n?", text)
        if e:
            return Out(text[e.end() :], False, int(e.group(1)))
        if text.startswith("<tool_use_error>"):
            return Out("", error=text)
        return Out(text, False, 0)

    def _task(self, text: str, handle: str | None) -> Out:
        own = text.split("[SYSTEM NOTIFICATION")[0].split("<task-notification>")[0]
        tags = dict(_TAG.findall(own))
        if "status" not in tags:
            return Out("", handle=handle, error=text[:500])
        running = tags["status"] == "running"
        code = tags.get("exit_code")
        return Out(tags.get("output", ""), running, int(code) if code else None, handle)

    def run(self, cmd: str, wait_s: float = 120) -> G:
        ms = int(min(600, max(wait_s + 30, 120)) * 1000)
        out = self._bash((yield self.call("Bash", command=cmd, timeout=ms)))
        if out.running:
            return (yield from self.wait(out, "exit", wait_s=wait_s))
        return out

    def start(
        self, cmd: str, tty: bool = False, ready_port: int | None = None, text: str | None = None
    ) -> G:
        return self._bash((yield self.call("Bash", command=cmd, run_in_background=True)))

    def _output(self, h: Out, block: bool, ms: int) -> G:
        text = yield self.call("TaskOutput", task_id=h.handle, block=block, timeout=ms)
        return self._task(text, h.handle), text

    def wait(
        self, h: Out, until: str = "exit", pattern: str | None = None, wait_s: float = 60
    ) -> G:
        waited, calls = 0.0, 0
        while True:
            ms = int(min(wait_s, 600) * 1000) if until in ("exit", "change") else 5000
            r, text = yield from self._output(h, True, ms)
            calls += 1
            # a wait that ended early (an MCP host's horizon) says so: it counts as 60 s
            early = "<retrieval_status>timeout</retrieval_status>" in text and self.server
            waited += min(ms / 1000, 60) if early else ms / 1000
            if r.error or not r.running or waited >= wait_s or until in ("change", "input"):
                return r
            if until == "pattern" and re.search(pattern or "", r.text):
                return r

    def wait_any(self, hs: list[Out], wait_s: float = 60) -> G:
        waited = 0.0
        while waited < wait_s:
            for h in hs:
                r, text = yield from self._output(h, True, 2000)
                waited += 2
                if not r.running and not r.error:
                    return r
                for note in re.findall(r"<task-notification>.*?</task-notification>", text, re.S):
                    tid = re.search(r"<task-id>(\w+)</task-id>", note)
                    if tid and "<status>completed</status>" in note:
                        other = next((x for x in hs if x.handle == tid.group(1)), None)
                        if other is not None and other is not h:
                            r, _ = yield from self._output(other, True, 2000)
                            if not r.running:
                                return r
        return Out("", True)

    def write(self, h: Out, text: str) -> G:
        return Out("", error="Bash has no stdin for a running command")
        yield

    _cd_done = False

    def sh(self, sh: Out, cmd: str, state: list[str]) -> G:
        """Bash keeps the working directory between calls (not the environment): a ``cd``
        step is given once, exports every time."""
        steps = [x for x in state if not (x.startswith("cd ") and self._cd_done)]
        self._cd_done = self._cd_done or any(x.startswith("cd ") for x in state)
        return (yield from self.run(" && ".join([*steps, cmd])))

    def stop(self, h: Out) -> G:
        text = yield self.call("TaskStop", task_id=h.handle)
        return Out(text, False, None, h.handle)


class TfbashTools(ToolSet):
    """tfbash-mcp 0.2.0: one active execution per shell."""

    pty = True

    def __init__(self, host: str) -> None:
        self.host = host
        self.server = "tfbash"
        self.name = f"tfbash-mcp@{host}"
        # its waits go up to 60 s, which is the host's tool timeout: 50 s keeps them inside
        self.max_wait_s = 50
        self._shells: list[str] = []
        self._cursors: dict[str, int] = {}

    def _d(self, text: str) -> dict[str, Any]:
        d = _json_after_prefix(text)
        return d if isinstance(d, dict) else {"error": text}

    def _out(self, d: dict[str, Any], sid: str | None) -> Out:
        if "error" in d and not d.get("exec_id"):
            return Out("", error=str(d["error"])[:500])
        state = str(d.get("status") or d.get("state") or "")
        running = state in ("running", "yielded", "active", "awaiting_input")
        code = d.get("exit_code")
        text = d.get("output") or d.get("stdout") or d.get("text") or ""
        h = f"{sid}|{d.get('exec_id')}|{d.get('next_cursor', d.get('cursor', 0))}"
        return Out(str(text), running and code is None, code, h)

    def _new_shell(self) -> G:
        d = self._d((yield self.call("shell_open")))
        sid = d.get("shell_id") or (d.get("shell") or {}).get("shell_id")
        return sid

    def _exec(self, sid: str, cmd: str, yield_ms: int, timeout_ms: int | None = None) -> G:
        args: dict[str, Any] = {"shell_id": sid, "command": cmd, "yield_ms": yield_ms}
        if timeout_ms:
            args["timeout_ms"] = timeout_ms
        d = self._d((yield self.call("shell_exec", **args)))
        if d.get("exec_id") and isinstance(d.get("next_cursor"), int):
            self._cursors[str(d["exec_id"])] = d["next_cursor"]
        return self._out(d, sid)

    def _read(self, h: Out, wait_ms: int) -> G:
        sid, eid, _ = (h.handle or "||0").split("|")
        args: dict[str, Any] = {"shell_id": sid, "exec_id": eid, "wait_ms": wait_ms}
        if eid in self._cursors:  # from where the last result said to go on
            args["cursor"] = self._cursors[eid]
        d = self._d((yield self.call("shell_read", **args)))
        if isinstance(d.get("next_cursor"), int):
            self._cursors[eid] = d["next_cursor"]
        return self._out(d, sid)

    def _follow(self, out: Out, wait_s: float) -> G:
        text, waited = out.text, 0.0
        while out.running and waited < wait_s and not out.error:
            r = yield from self._read(out, 50000)
            waited += 50
            text += r.text
            out = Out(text, r.running, r.exit_code, r.handle, r.error)
        return out

    def _free_shell(self) -> G:
        if not self._shells:
            sid = yield from self._new_shell()
            self._shells.append(sid)
        return self._shells[0]

    def run(self, cmd: str, wait_s: float = 120) -> G:
        sid = yield from self._free_shell()
        out = yield from self._exec(sid, cmd, 50000)
        return (yield from self._follow(out, wait_s))

    def start(
        self, cmd: str, tty: bool = False, ready_port: int | None = None, text: str | None = None
    ) -> G:
        sid = yield from self._new_shell()  # a shell of its own: one execution per shell
        # its default timeout_ms (120 s) would kill a long job: 30 min, as Conch's default
        return (yield from self._exec(sid, cmd, 1000, timeout_ms=1800000))

    def wait(
        self, h: Out, until: str = "exit", pattern: str | None = None, wait_s: float = 60
    ) -> G:
        text, waited = "", 0.0
        while True:
            ms = {"exit": 50000, "change": int(min(wait_s, 50) * 1000)}.get(until, 5000)
            r = yield from self._read(h, ms)
            h = Out(h.text, h.running, None, r.handle or h.handle)
            text += r.text
            waited += ms / 1000
            if r.error or not r.running or waited >= wait_s or until in ("change", "input"):
                return Out(text, r.running, r.exit_code, h.handle, r.error)
            if until == "pattern" and re.search(pattern or "", text):
                return Out(text, True, None, h.handle)

    def wait_any(self, hs: list[Out], wait_s: float = 60) -> G:
        waited = 0.0
        while waited < wait_s:
            for i, h in enumerate(hs):
                r = yield from self._read(h, 2000)
                hs[i] = Out(h.text, True, None, r.handle or h.handle)
                waited += 2
                if not r.running and not r.error:
                    return r
        return Out("", True)

    def write(self, h: Out, text: str) -> G:
        sid, eid, _ = (h.handle or "||").split("|")
        yield self.call("shell_write", shell_id=sid, exec_id=eid, text=text)
        return (yield from self.wait(h, "change", wait_s=1))

    def stop(self, h: Out) -> G:
        sid, eid, _ = (h.handle or "||").split("|")
        d = self._d(
            (yield self.call("shell_signal", shell_id=sid, exec_id=eid, signal="interrupt"))
        )
        return Out(json.dumps(d)[:200])

    def shell(self) -> G:
        sid = yield from self._free_shell()
        return Out("", handle=sid)

    def sh(self, sh: Out, cmd: str, state: list[str]) -> G:
        out = yield from self._exec(str(sh.handle), cmd, 50000)
        return (yield from self._follow(out, 120))


_PID = re.compile(r"\bpid\D{0,5}(\d+)", re.I)


class AiDeviceBashTools(ToolSet):
    """ai-device-bash 0.2.0: ``bash`` (timeout, then background with a pid), ``get``."""

    cumulative = True

    def __init__(self, host: str) -> None:
        self.host = host
        self.server = "ai-device-bash"
        self.name = f"ai-device-bash@{host}"

    def _out(self, text: str) -> Out:
        d = _json_after_prefix(text)
        blob = text if not isinstance(d, dict) or "error" in d else json.dumps(d)
        if isinstance(d, dict) and "error" not in d:
            code_word = str(d.get("code", "")).upper()
            status = str(d.get("status", "")).lower()
            out = d.get("output") or d.get("stdout") or ""
            if isinstance(out, dict):
                out = "\n".join(str(v) for v in out.values() if v)
            pid = d.get("background_pid") or d.get("pid")
            running = code_word in ("BACKGROUND", "RUNNING", "TIMEOUT") or "running" in status
            if code_word == "NOT_RUNNING":
                return Out(str(out), False, None, None, error=str(d.get("message")))
            code = d.get("exit_code", d.get("returncode"))
            return Out(str(out), running, code, str(pid) if pid else None)
        m = _PID.search(blob)
        running = "BACKGROUND" in blob or "running" in blob.lower()
        code = re.search(r"exit(?:_code| code)?\D{0,4}(-?\d+)", blob, re.I)
        return Out(blob, running, int(code.group(1)) if code else None, m.group(1) if m else None)

    def run(self, cmd: str, wait_s: float = 120) -> G:
        out = self._out((yield self.call("bash", command=cmd, timeout=min(wait_s, 600))))
        if out.running:
            return (yield from self.wait(out, "exit", wait_s=wait_s))
        return out

    def start(
        self, cmd: str, tty: bool = False, ready_port: int | None = None, text: str | None = None
    ) -> G:
        return self._out((yield self.call("bash", command=cmd, timeout=1)))

    def wait(
        self, h: Out, until: str = "exit", pattern: str | None = None, wait_s: float = 60
    ) -> G:
        waited = 0.0
        while True:
            # an MCP call dies at the host's 60 s tool timeout: wait 50 s at most a call
            t = min(wait_s, 50) if until == "exit" else 5
            r = self._out((yield self.call("get", pid=int(h.handle or 0), timeout=t, bytes=2000)))
            r.handle = h.handle
            waited += t
            if not r.running or waited >= wait_s or until in ("change", "input"):
                return r
            if until == "pattern" and re.search(pattern or "", r.text):
                return r

    def wait_any(self, hs: list[Out], wait_s: float = 60) -> G:
        waited = 0.0
        while waited < wait_s:
            for h in hs:
                r = self._out((yield self.call("get", pid=int(h.handle or 0), timeout=2)))
                waited += 2
                if not r.running:
                    return r
        return Out("", True)

    def write(self, h: Out, text: str) -> G:
        return Out("", error="no stdin for a running command")
        yield

    def stop(self, h: Out) -> G:
        return self._out((yield self.call("bash", command=f"kill -TERM -- -{h.handle} {h.handle}")))


class ShellServerTools(ToolSet):
    """mcp-shell-server 1.1.14: ``shell_execute {command: [argv...], directory, timeout}``.
    Its policy refuses shells (``bash``), ``;``/``&&`` and ``2>&1``; ``|``, ``>`` and ``<`` are
    allowed as separate tokens. So a command line is split at ``;``/``&&`` into one call each
    (``echo "exit=$?"`` is read from the previous call's exit code, which the result shows); no
    background jobs, no stdin to a running program."""

    cumulative = True

    def __init__(self, host: str, workdir: str) -> None:
        self.host = host
        self.server = "shell"
        self.name = f"mcp-shell-server@{host}"
        self.workdir = workdir
        self.cwd = workdir

    def _out(self, text: str) -> Out:
        d = _json_after_prefix(text)
        if isinstance(d, dict) and "error" not in d:
            out = (d.get("stdout") or "") + (d.get("stderr") or "")
            return Out(out, False, d.get("exit_code", d.get("status")))
        m = re.search(r"(?:exit code|exit status):? (-?\d+)", text, re.I)
        if text.startswith("Error executing command") and not m:
            return Out(text, False, None, error=text)
        return Out(text, False, int(m.group(1)) if m else None)

    def run(self, cmd: str, wait_s: float = 120) -> G:
        import shlex

        text, last = "", None
        for part in re.split(r"\s*(?:;|&&)\s*", cmd):
            if not part:
                continue
            if part.strip() == 'echo "exit=$?"':
                text += f"exit={last}\n"
                continue
            argv = [a for a in shlex.split(part) if a != "2>&1"]
            if argv and argv[0] == ">":
                continue
            if argv[:1] == ["cd"]:  # its `directory` argument instead
                self.cwd = f"{self.workdir}/{argv[1]}"
                continue
            if argv[:1] == ["export"]:  # no way to set the environment: left out
                continue
            args = {"command": argv, "directory": self.cwd, "timeout": int(wait_s)}
            r = self._out((yield self.call("shell_execute", **args)))
            text += r.text
            last = r.exit_code
            if r.error:
                return Out(text, False, None, error=r.error)
        return Out(text, False, last)

    def start(
        self, cmd: str, tty: bool = False, ready_port: int | None = None, text: str | None = None
    ) -> G:
        return Out("", error="mcp-shell-server runs no background jobs")
        yield

    def wait(
        self, h: Out, until: str = "exit", pattern: str | None = None, wait_s: float = 60
    ) -> G:
        return h
        yield

    def wait_any(self, hs: list[Out], wait_s: float = 60) -> G:
        return Out("", error="no background jobs")
        yield

    def write(self, h: Out, text: str) -> G:
        return Out("", error="no stdin for a running command")
        yield

    def stop(self, h: Out) -> G:
        return Out("", error="no background jobs")
        yield

"""Signals a server inherited as ignored never reach its children, and undoing them keeps the
fast spawn path (no preexec function, so Popen can vfork): core/process/hygiene.spawning.
Neither ignored nor blocked signals reach a pipe, PTY, script or shell job."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from fresh_python import run_child


def test_inherited_ignored_signals_are_default_in_children_and_stay_ignored_here(
    tmp_path: Path,
) -> None:
    script = tmp_path / "child.py"
    script.write_text(
        textwrap.dedent(
            """
            import asyncio, json, signal, subprocess, sys
            import conch
            from conch.core.process import hygiene

            for s in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT):
                signal.signal(s, signal.SIG_IGN)  # what nohup or a background shell hands down
            with hygiene.spawning() as preexec:
                fast = preexec is None
            popen_calls = []
            real = subprocess.Popen._execute_child

            def spy(self, *args):
                popen_calls.append((args[0][0], args[2]))  # (program, preexec_fn)
                return real(self, *args)

            subprocess.Popen._execute_child = spy

            async def main():
                cfg = conch.Config(data_dir=sys.argv[1] + "/data")
                async with conch.Runtime(cfg) as rt:
                    cmd = "grep SigIgn /proc/self/status; kill -INT $$; echo alive"
                    r = await rt.exec(command=cmd)
                return r

            r = asyncio.run(main())
            here = [signal.getsignal(s) is signal.SIG_IGN for s in (signal.SIGHUP, signal.SIGINT)]
            print(json.dumps({"fast": fast, "output": r["output"], "state": r["state"],
                              "signal": r["signal"], "here": here,
                              "preexec": [[a, p is not None] for a, p in popen_calls]}))
            """
        )
    )
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["fast"] is True
    # SIGPIPE and SIGXFSZ (Python's own) are reset by Popen: nothing is ignored in the child
    assert out["output"].split() == ["SigIgn:", "0000000000000000"]
    assert out["state"] == "exited" and out["signal"] == "SIGINT"  # INT killed it: default
    assert out["here"] == [True, True]  # the server still ignores them
    spawns = [slow for _, slow in out["preexec"]]
    assert spawns and not any(spawns), out["preexec"]  # every spawn kept the vfork path


# -- inherited signal state (issue 8, part 1) -------------------------------------------------

SIG_LINES = "awk '/^Sig(Ign|Blk):/ {print $1, $2}' /proc/self/status"


def test_children_start_with_default_signals_whatever_the_server_inherited(
    tmp_path: Path,
) -> None:
    out = run_child(
        tmp_path,
        f"""
        import asyncio, json, signal, sys
        import conch

        # what nohup, a supervisor or a background shell hand down
        for s in (signal.SIGHUP, signal.SIGQUIT, signal.SIGINT):
            signal.signal(s, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
        tmp = sys.argv[1]
        SIG = {SIG_LINES!r}

        async def main():
            cfg = conch.Config(result_detail="full", data_dir=tmp + "/data", default_cwd=tmp)
            out = {{}}
            async with conch.Runtime(cfg) as rt:
                for pty in (False, True):
                    kind = "pty" if pty else "pipe"
                    cmd = SIG + "; kill -HUP $$; echo alive"
                    r = await rt.call_tool("exec", {{"command": cmd, "pty": pty}})
                    out[kind] = [r["output"], r["state"], r.get("signal")]
                    text = SIG + "\\nkill -INT $$\\necho alive"
                    r = await rt.call_tool("exec", {{"script": text, "pty": pty}})
                    out[kind + "_script"] = [r["output"], r["state"], r.get("signal")]
                s = await rt.call_tool("shell_open", {{}})
                r = await rt.call_tool("exec", {{"shell_id": s["shell_id"], "command": SIG}})
                out["shell"] = [r["output"], r["state"], r.get("signal")]
                await rt.call_tool("shell_close", {{"shell_id": s["shell_id"]}})
            print(json.dumps(out))

        asyncio.run(main())
        """,
        timeout=120,
    )
    clean = "SigBlk: 0000000000000000\nSigIgn: 0000000000000000\n"
    assert out["pipe"] == [clean, "exited", "SIGHUP"], out
    assert out["pty"] == [clean, "exited", "SIGHUP"], out
    assert out["pipe_script"] == [clean, "exited", "SIGINT"], out
    assert out["pty_script"] == [clean, "exited", "SIGINT"], out
    assert out["shell"][0] == clean, out

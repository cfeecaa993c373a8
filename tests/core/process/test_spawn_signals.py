"""Signals a server inherited as ignored never reach its children, and undoing them keeps the
fast spawn path (no preexec function, so Popen can vfork): core/process/hygiene.spawning."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path


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

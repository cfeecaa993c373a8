"""A second local user, for the tests of what another account on the machine may do to a Conch
server (its HTTP guard tells users apart). Made with ``useradd`` (the suite runs as root) and
removed afterwards; its commands run through ``setpriv`` with its uid, gid and no other groups.

Without root, ``useradd`` or ``setpriv`` the test skips naming what is missing, and fails under
``CI=true`` (system_tools.unavailable).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import system_tools

# the user's programs run with the system's Python: the suite's venv may sit where they
# cannot read it
PYTHON = shutil.which("python3", path="/usr/bin:/bin") or "/usr/bin/python3"


@dataclass(frozen=True)
class LocalUser:
    name: str
    uid: int
    gid: int

    def argv(self, *command: str) -> list[str]:
        """``command`` run as this user."""
        return [
            shutil.which("setpriv") or "setpriv",
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--clear-groups",
            "--",
            *command,
        ]

    def run(self, *command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        env = {"PATH": "/usr/bin:/bin", "HOME": "/", "LANG": "C.UTF-8"}
        return subprocess.run(
            self.argv(*command), capture_output=True, text=True, timeout=timeout, cwd="/", env=env
        )

    def popen(self, *command: str) -> subprocess.Popen[str]:
        env = {"PATH": "/usr/bin:/bin", "HOME": "/", "LANG": "C.UTF-8"}
        return subprocess.Popen(
            self.argv(*command),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd="/",
            env=env,
            start_new_session=True,
        )

    def python(
        self, script: str, *args: str, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return self.run(PYTHON, "-c", script, *args, timeout=timeout)


def _need() -> None:
    if os.geteuid() != 0:
        system_tools.unavailable("a second local user", "needs root to create one with useradd")
    for tool in ("useradd", "userdel", "setpriv"):
        if shutil.which(tool) is None:
            system_tools.unavailable(
                "a second local user", f"needs {tool} (Debian packages passwd, util-linux)"
            )
    if not os.path.exists(PYTHON):
        system_tools.unavailable("a second local user's Python", f"needs {PYTHON}")


def _useradd(name: str) -> subprocess.CompletedProcess[str]:
    # another worker adding its own user at the same moment holds the passwd lock: retry
    for _ in range(20):
        r = subprocess.run(
            ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
            capture_output=True,
            text=True,
        )
        if r.returncode != 10 and "lock" not in r.stderr:
            return r
        time.sleep(0.25)
    return r


@contextlib.contextmanager
def local_user() -> Iterator[LocalUser]:
    """A new local user, removed when the block ends."""
    _need()
    name = f"conchpeer{os.getpid()}"
    made = False
    try:
        try:
            pwd.getpwnam(name)  # left by a run of the same pid that was killed: reuse it
        except KeyError:
            r = _useradd(name)
            if r.returncode != 0:
                system_tools.unavailable("a second local user", f"useradd: {r.stderr.strip()}")
            made = True
        entry = pwd.getpwnam(name)
        yield LocalUser(name, entry.pw_uid, entry.pw_gid)
    finally:
        if made or _exists(name):
            for _ in range(20):
                r = subprocess.run(["userdel", name], capture_output=True, text=True)
                if r.returncode != 10 and "lock" not in r.stderr:
                    break
                time.sleep(0.25)


def _exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True

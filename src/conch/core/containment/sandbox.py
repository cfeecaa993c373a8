"""The sandbox (docs/spec.md §9a): how a job's argv is wrapped so it runs fenced in.

Levels: ``off`` < ``workspace-write`` < ``read-only``; network: ``on`` < ``off``. A per-call
value may only tighten the server's (``effective``).

Linux: bubblewrap. The whole filesystem is bound read-only, ``/dev`` (with a devpts of its own:
no terminal of the host; at every level), ``/proc`` and ``/tmp`` are private, the workspace (the
default cwd's tree) is bound writable for ``workspace-write``, Conch's data dir is hidden (an
empty read-only tmpfs; the few files a job must read — its script, a shell's command file — are
bound back read-only), a new PID namespace with ``--die-with-parent`` takes every descendant
down with the job, ``--unshare-net`` cuts the network, and a seccomp program loaded for every
job (``seccomp.seccomp_program``) refuses setuid/setgid modes, leases and user namespaces (and
under ``network: off`` every host socket). bwrap itself ignores the signals Conch
forwards (so an interrupt reaches the program, not the monitor), and ``env --default-signal``
gives the program default dispositions again.

macOS: a ``sandbox-exec`` profile with the same rules (untested in CI: no macOS runner).

Everything here is pure except ``probe`` (runs bwrap once to see that it can set up).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass

MODES = ("off", "workspace-write", "read-only")
NETWORK = ("on", "off")
_STRENGTH = {"off": 0, "workspace-write": 1, "read-only": 2}
# the signals Conch (or the terminal) may send to a job's process group
FORWARDED = ("SIGINT", "SIGQUIT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGTSTP")


class Loosening(ValueError):
    """A per-call sandbox or network value weaker than the server's."""


@dataclass(frozen=True)
class Policy:
    sandbox: str = "off"
    network: str = "on"

    @property
    def active(self) -> bool:
        return self.sandbox != "off" or self.network == "off"


def effective(server: Policy, sandbox: str | None, network: str | None) -> Policy:
    """The policy of one call: the server's, tightened by the call's values."""
    if sandbox is not None:
        if sandbox not in MODES:
            raise ValueError(f"sandbox must be one of {', '.join(MODES)}")
        if _STRENGTH[sandbox] < _STRENGTH[server.sandbox]:
            raise Loosening(
                f"sandbox {sandbox!r} would loosen the server's sandbox {server.sandbox!r}; "
                "a call may only tighten it"
            )
    if network is not None:
        if network not in NETWORK:
            raise ValueError("network must be on or off")
        if network == "on" and server.network == "off":
            raise Loosening("network 'on' would loosen the server's network 'off'")
    return Policy(sandbox or server.sandbox, network or server.network)


@dataclass(frozen=True)
class Fence:
    """Everything a sandboxed spawn needs to know."""

    policy: Policy
    workspace: str  # writable under workspace-write
    hidden: tuple[str, ...]  # directories the job must not see (Conch's data dir)
    exposed: tuple[str, ...] = ()  # files inside hidden dirs the job must read
    cwd: str = "/"
    masked: tuple[str, ...] = ()  # files the job must not read (the server's --env-file)


# The host's kernel settings and the other host-wide files of procfs and sysfs. The PID
# namespace's own /proc still shows them, and a root server's job (root, capabilities dropped)
# may write every one whose mode lets root write (sysctl files check the file mode, not a
# capability: kernel.core_pattern runs a program as root outside every namespace). So they
# are bound read-only over the sandbox's /proc (the list Docker and runc also keep read-only,
# plus what a walk of this kernel's procfs found writable: tests/core/containment/test_sandbox.py).
HOST_PROC_READ_ONLY = (
    "/proc/sys",
    "/proc/sysrq-trigger",
    "/proc/irq",
    "/proc/bus",
    "/proc/fs",
    "/proc/mtrr",
    "/proc/pressure",
    "/proc/acpi",
    "/proc/scsi",
)


def bwrap_argv(
    bwrap: str,
    env_prog: str,
    fence: Fence,
    argv: Sequence[str],
    *,
    root: bool,
    seccomp_fd: int | None = None,
    binds: Sequence[str] = (),
) -> list[str]:
    """The bubblewrap command line that runs ``argv`` under ``fence`` (pure). ``seccomp_fd``:
    the descriptor bwrap reads the job's seccomp program from (``seccomp.seccomp_program``:
    no setuid file, lease or user namespace; under ``network: off`` no host socket either: a
    read-only bind does not stop ``connect()``). ``binds``: directories
    inside a hidden one that this sandbox sees at their own path (``sandbox_sockets``: the
    job's channel to Conch's broker)."""
    p, ws = fence.policy, fence.workspace
    if p.sandbox == "off":  # network off only: the filesystem stays as it is, but for /dev
        # a private /dev at every level: the host's /dev/pts holds every terminal of the host
        # (other jobs', a person's), which a job could open, read and write; bwrap's own /dev
        # has the few devices and a devpts of the sandbox's own (new terminals work there)
        out = [bwrap, "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        out += ["--ro-bind", "/sys", "/sys"]  # no host kernel setting, whatever the level
    else:
        out = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for path in HOST_PROC_READ_ONLY:
        out += ["--ro-bind-try", path, path]
    if p.sandbox != "off":
        out += ["--tmpfs", "/tmp"]
        # the entries of /tmp that hold the workspace, the cwd or the data dir stay visible,
        # read-only (so their neighbours fail with EROFS, as everywhere else)
        for top in tmp_tops((ws, fence.cwd, *fence.hidden)):
            out += ["--ro-bind", top, top]
        if p.sandbox == "workspace-write":
            out += ["--bind", ws, ws]
            # the repository's hooks and config stay read-only (a hook runs later, outside),
            # and none can be made, nor the top made a bare repository (its HEAD): where there
            # is no .git or HEAD, Conch has put an empty directory there to bind
            # (conch/core/containment/gitdir.py)
            for name in (".git", "HEAD"):
                out += ["--ro-bind-try", f"{ws}/{name}", f"{ws}/{name}"]
    for d in fence.hidden:
        out += ["--tmpfs", d]
    for f in fence.exposed:
        out += ["--ro-bind", f, f]
    for f in fence.masked:  # an empty file in its place, read-only (it cannot be moved either)
        out += ["--ro-bind", "/dev/null", f]
    for d in binds:  # (a socket in it: connect() needs no writable mount)
        out += ["--ro-bind", d, d]
    for d in fence.hidden:
        out += ["--remount-ro", d]
    out += ["--unshare-pid", "--die-with-parent"]
    if p.network == "off":
        out += ["--unshare-net"]
    if seccomp_fd is not None:
        out += ["--seccomp", str(seccomp_fd)]
    if root:
        # a root server's jobs would otherwise keep every capability (and could remount /)
        out += ["--cap-drop", "ALL"]
    out += ["--chdir", fence.cwd, "--", env_prog, "--default-signal", "--", *argv]
    return out


def tmp_tops(paths: Sequence[str]) -> list[str]:
    """The first-level entries of /tmp that contain any of ``paths`` (sorted, unique)."""
    out = set()
    for path in paths:
        parts = path.split("/")
        if len(parts) > 2 and parts[0] == "" and parts[1] == "tmp" and parts[2]:
            out.add("/tmp/" + parts[2])
    return sorted(out)


def _sbpl_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def seatbelt_profile(fence: Fence, tmpdir: str) -> str:
    """A sandbox-exec (Seatbelt) profile with the rules of ``fence`` (pure; macOS only)."""
    p = fence.policy
    writable = [f"(subpath {_sbpl_string(tmpdir)})"]
    if p.sandbox == "workspace-write":
        writable.append(f"(subpath {_sbpl_string(fence.workspace)})")
    lines = ["(version 1)", "(allow default)"]
    if p.sandbox != "off":
        lines += [
            "(deny file-write*)",
            "(allow file-write* "
            + " ".join(
                [
                    *writable,
                    '(literal "/dev/null")',
                    '(literal "/dev/zero")',
                    '(literal "/dev/dtracehelper")',
                    '(regex #"^/dev/tty")',
                    '(regex #"^/dev/ptmx$")',
                    '(regex #"^/dev/fd/")',
                ]
            )
            + ")",
        ]
    for d in fence.hidden:
        lines.append(f"(deny file-write* (subpath {_sbpl_string(d)}))")
        lines.append(f"(deny file-read* (subpath {_sbpl_string(d)}))")
    for f in fence.exposed:
        lines.append(f"(allow file-read* (literal {_sbpl_string(f)}))")
    for f in fence.masked:
        lines.append(f"(deny file-read* file-write* (literal {_sbpl_string(f)}))")
    if p.network == "off":
        lines += ["(deny network*)", '(allow network* (remote unix-socket (path-regex #"^/")))']
    return "\n".join(lines) + "\n"


def seatbelt_argv(fence: Fence, argv: Sequence[str], tmpdir: str) -> list[str]:
    return ["/usr/bin/sandbox-exec", "-p", seatbelt_profile(fence, tmpdir), "--", *argv]


# -- availability ------------------------------------------------------------------------------


def find_bwrap(configured: str = "") -> str | None:
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    return shutil.which("bwrap")


def backend() -> str:
    if sys.platform.startswith("linux"):
        return "bwrap"
    if sys.platform == "darwin":
        return "sandbox-exec"
    return ""


async def probe(bwrap: str, *, network_off: bool, root: bool, env_prog: str = "env") -> str | None:
    """Run bwrap once with the namespaces a job will need (and the ``env --default-signal``
    every job goes through, coreutils >= 8.31); None if it works, else why not."""
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid"]
    argv += ["--die-with-parent"]
    if network_off:
        argv.append("--unshare-net")
    if root:
        argv += ["--cap-drop", "ALL"]
    argv += ["--", env_prog, "--default-signal", "--", "true"]
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        _, err = await asyncio.wait_for(proc.communicate(), 10.0)
    except (OSError, asyncio.TimeoutError) as e:
        return f"{bwrap} could not run: {e}"
    if proc.returncode != 0:
        text = err.decode("utf-8", "replace").strip()[-500:]
        return f"{bwrap} cannot set up a sandbox here (exit {proc.returncode}): {text}"
    return None

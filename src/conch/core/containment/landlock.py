"""The ``landlock`` sandbox backend (SPEC §9a): what a job's Landlock ruleset holds, the fork
server that applies it before the job's program runs (core/containment/lockdown.py), and what
this backend guarantees on this kernel.

Rules of one job (``job_spec``), all filesystem rights of the ABI handled:
* read and execute beneath ``/`` except the holes: Conch's data dir (and in it every job's temp
  dir), the server's ``--env-file``, ``/dev`` (only ``DEVICES`` and ``/dev/pts`` are granted);
  the directories above a hole are not listable (Landlock grants hierarchies, never "all but");
* writes where the level allows: ``workspace-write`` its workspace less ``.git``; ``off``
  (network off only) ``/`` less the holes, ``/proc`` and ``/sys``; ``read-only`` nothing;
  always the job's own ``TMPDIR`` (made by Conch inside the data dir, read and write) and the
  few devices;
* read of the files a job must see inside the data dir (its script, a shell's command file);
* ``network: off``: TCP bind/connect handled with no port granted (ABI 4), abstract Unix
  sockets scoped (ABI 6), and the seccomp filter (``lockdown.seccomp_program``);
* signals scoped at every level (ABI 6): a job signals only its own processes;
* below ABI 3 (no TRUNCATE right) the seccomp filter refuses truncation by path at every
  level (``truncate``, a read-only ``open`` with O_TRUNC): ``fs_write`` holds by it.

Everything here follows ``Layout.abi``, the ABI in use (``landlock_abi_max`` may lower the
kernel's): a cap of N builds the ruleset, the filter and the guarantees of a kernel of ABI N.
"""

from __future__ import annotations

import errno
import marshal
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from conch.core.containment import lockdown as ld
from conch.core.containment import metaops
from conch.core.containment import sandbox as sb

GUARANTEES = (
    "fs_write",
    "fs_hide_data_dir",
    "private_tmp",
    "pid_namespace",
    "net_tcp",
    "net_all",
    "unix_sockets",
    "signals",
)


def needed(policy: sb.Policy) -> tuple[str, ...]:
    """The guarantees a call with ``policy`` cannot go without (a private /tmp and a PID
    namespace are how bwrap gives some of them, not needs of their own)."""
    out: list[str] = []
    if policy.sandbox != "off":
        out += ["fs_write", "fs_hide_data_dir"]
    if policy.network == "off":
        out += ["fs_hide_data_dir", "net_tcp", "net_all", "unix_sockets"]
    if policy.active:
        out.append("signals")
    return tuple(dict.fromkeys(out))


def landlock_guarantees(abi: int, seccomp: bool) -> list[str]:
    out = []
    # Landlock handles no metadata change (chmod, chown, utimes, xattrs) and, below ABI 3, no
    # truncation by path: the seccomp filter is what refuses them, so without it neither
    # holds
    if abi >= 1 and seccomp:
        out += ["fs_write", "fs_hide_data_dir"]
    if abi >= 4 or seccomp:
        out.append("net_tcp")
    if seccomp:
        out += ["net_all", "unix_sockets"]
    if abi >= 6:
        out.append("signals")
    return out


def bwrap_guarantees(seccomp: bool) -> list[str]:
    out = ["fs_write", "fs_hide_data_dir", "private_tmp", "pid_namespace", "net_tcp", "net_all"]
    if seccomp:  # a read-only bind does not stop connect(): the filter does
        out.append("unix_sockets")
    out.append("signals")  # (the PID namespace: nothing outside is visible to signal)
    return out


@dataclass(frozen=True)
class Layout:
    """What every job of one runtime shares: the holes and the writable roots' bases."""

    workspace: str
    hidden: tuple[str, ...]  # the data dir (and so every job's TMPDIR, inside it)
    masked: tuple[str, ...]  # files no job may read (the --env-file)
    abi: int
    root: bool
    seccomp: bool = True  # the seccomp filter loads here (probed)


def _workspace_tree(layout: Layout) -> tuple[str, tuple[str, ...]]:
    """The tree a workspace-write job may write, and the holes in it (hidden, masked, .git)."""
    ws = layout.workspace
    return ws, (*layout.hidden, *layout.masked, os.path.join(ws, ".git"))


def metadata_roots(layout: Layout, policy: sb.Policy, tmpdir: str) -> metaops.Roots:
    """Where a job's brokered mode and time changes may land: what job_spec's ruleset lets
    it write (the workspace less its holes, its temp dir, the device directories)."""
    trees = (_workspace_tree(layout),) if policy.sandbox == "workspace-write" else ()
    return metaops.Roots(trees, tuple(d for d in (tmpdir, *ld.DEVICE_DIRS) if d))


def job_spec(
    layout: Layout,
    policy: sb.Policy,
    *,
    path: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: str,
    tmpdir: str,
    exposed: Sequence[str],
    procs: Sequence[str],
    tty: str | None,
    cgroup: str | None = None,
    brokered: bool = False,
    broker_metadata: bool = False,
) -> dict[str, Any]:
    """The fork server's request for one job (marshal-able: str, int, bytes, lists).
    ``cgroup``: the cgroup v2 directory to start the child in (clone3); else, or when the
    kernel refuses that, the child writes itself into each of ``procs``. ``brokered``
    (``sandbox_sockets``): a ``network: off`` job's connects go to Conch (``notify``; the
    channel is the last descriptor sent).
    ``broker_metadata``: a ``workspace-write`` job's mode and time changes go to Conch too
    (conch/core/containment/metaops.py); without it only setuid/setgid modes are refused."""
    abi = layout.abi
    write = ld.write_rights(abi)
    holes = [*layout.hidden, *layout.masked]
    trees: list[tuple[str, list[str], int]] = [("/", [*holes, "/dev"], ld.READ)]
    if policy.sandbox == "workspace-write":
        ws, ws_holes = _workspace_tree(layout)
        trees.append((ws, list(ws_holes), write))
    elif policy.sandbox == "off":  # network off alone: the filesystem stays writable
        trees.append(("/", [*holes, "/dev", "/proc", "/sys"], write))
    for d in ld.DEVICE_DIRS:
        trees.append((d, [], ld.READ | ld.FS_WRITE_FILE))
    paths: list[tuple[str, int]] = [(tmpdir, ld.fs_rights(abi))]
    paths += [(dev, ld.FS_READ_FILE | ld.FS_WRITE_FILE) for dev in ld.DEVICES]
    paths += [(f, ld.FS_READ_FILE | ld.FS_EXECUTE) for f in exposed]
    scoped = ld.SCOPE_SIGNAL
    if policy.network == "off":
        scoped |= ld.SCOPE_ABSTRACT_UNIX_SOCKET
    net_off = policy.network == "off"
    guard = abi < 3  # no TRUNCATE right: the filter refuses truncation by path (any level)
    # Landlock handles no metadata change: read-only refuses them all, workspace-write the
    # setuid/setgid bits (lockdown.seccomp_program)
    metadata = {"read-only": "all", "workspace-write": "setid"}.get(policy.sandbox, "")
    program = notify = b""
    brokered = brokered and net_off and layout.seccomp
    meta = broker_metadata and metadata == "setid" and layout.seccomp
    if meta:
        metadata = "brokered"
    if layout.seccomp and (net_off or guard or metadata):
        program = ld.seccomp_program(
            net_off=net_off, truncate=guard, connect_ok=brokered, metadata=metadata
        )
    if brokered or meta:
        notify = ld.notify_program(connect=brokered, metadata=meta)
    enc = os.fsencode
    return {
        "abi": abi,
        "trees": trees,
        "paths": paths,
        "net_off": net_off,
        "scoped": scoped,
        "seccomp": program,
        "notify": notify,
        "drop_caps": layout.root,
        "path": path,
        "argv": [enc(a) for a in argv],
        "env": {enc(k): enc(v) for k, v in env.items()},
        "cwd": cwd,
        "tty": tty,
        "procs": list(procs),
        "cgroup": cgroup or "",
    }


class ForkServer:
    """Conch's end of the fork server: started once (lazily), restarted if it died."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    def _start(self) -> socket.socket:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", ld.__file__, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._sock = ours
        return ours

    def spawn(self, spec: dict[str, Any], fds: Sequence[int]) -> int:
        """Start one job (``spec``: ``job_spec``); its pid, a child of this process. A failure
        is the ``OSError`` of the step that failed (the failed child reaped)."""
        msg = marshal.dumps(spec)
        with self._lock:
            for attempt in (0, 1):
                sock = self._sock or self._start()
                try:
                    rights = struct.pack(f"{len(fds)}i", *fds)
                    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)] if fds else []
                    sock.sendmsg([msg], anc)
                    answer = sock.recv(1 << 16)
                    if not answer:
                        raise ConnectionResetError(errno.ECONNRESET, "fork server ended")
                    break
                except OSError:
                    self._stop()
                    if attempt:
                        raise
        pid, stage, code, message = marshal.loads(answer)
        if code:
            if pid:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
            filename = spec["path"] if stage == "exec" else None
            if stage != "exec":
                message = f"the landlock sandbox could not be set up ({stage}): {message}"
            raise OSError(code, message, filename)
        return int(pid)

    def _stop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None

    def close(self) -> None:
        with self._lock:
            self._stop()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None


class TempDirs:
    """Each job's own TMPDIR under the landlock backend (no private /tmp there): inside the
    data dir, so no other job sees it; removed when the job is done, all at close."""

    def __init__(self, data_dir: str, instance: str) -> None:
        self.root = os.path.join(data_dir, "tmp", instance)

    def make(self, name: str) -> str:
        os.makedirs(self.root, mode=0o700, exist_ok=True)
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:40]
        return tempfile.mkdtemp(prefix=f"{safe}.", dir=self.root)

    @staticmethod
    def remove(path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        try:
            os.rmdir(os.path.dirname(self.root))
        except OSError:
            pass


def probe(server: ForkServer, layout: Layout, true: str, *, seccomp: bool) -> str | None:
    """One job under the strictest spec (read-only, network off; without the seccomp filter
    when not ``seccomp``) through the fork server: None when it ran and exited 0, else why."""
    tmp = tempfile.mkdtemp(prefix="conch-probe.")
    try:
        spec = job_spec(
            layout,
            sb.Policy("read-only", "off"),
            path=true,
            argv=[true],
            env={"PATH": "/usr/bin:/bin"},
            cwd="/",
            tmpdir=tmp,
            exposed=(),
            procs=(),
            tty=None,
        )
        if not seccomp:
            spec["seccomp"] = b""
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        try:
            pid = server.spawn(spec, [null, null, null])
        finally:
            os.close(null)
        _, status = os.waitpid(pid, 0)
        if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
            return f"a probe job under Landlock did not run (wait status {status})"
        return None
    except OSError as e:
        return f"landlock: {e.strerror or e}"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

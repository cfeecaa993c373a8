"""Small, fast reads of the process table: Linux /proc first, psutil elsewhere."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterable

LINUX = sys.platform.startswith("linux")


def stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name: [state, ppid, pgrp, session, ...]."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data[data.rfind(b")") + 2 :].decode("ascii", "replace").split()


def is_alive(pid: int) -> bool:
    """True if the process exists and is not a zombie."""
    if LINUX:
        fields = stat_fields(pid)
        return fields is not None and fields[0] not in ("Z", "X")
    try:
        import psutil

        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except Exception:
        return False


def live_start_time(pid: int) -> str | None:
    """``start_time`` of a process that runs (not a zombie), else None; one read of its stat."""
    if LINUX:
        fields = stat_fields(pid)
        return fields[19] if fields and fields[0] not in ("Z", "X") else None
    return start_time(pid) if is_alive(pid) else None


def comm(pid: int) -> str:
    """The process's command name (``/proc/<pid>/comm``), "" once it is gone."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


_PID_NS: str | None = None


def pid_namespace() -> str:
    """This process's PID namespace, as its inode number (``"0"`` where the OS has none;
    ``"unknown"`` where Linux does not say: then no other server's processes are judged)."""
    global _PID_NS
    if _PID_NS is None:
        if not LINUX:
            _PID_NS = "0"
        else:
            try:
                link = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
                _PID_NS = link.split("[", 1)[1].rstrip("]") if "[" in link else "unknown"
            except OSError:
                _PID_NS = "unknown"
            if not _PID_NS.isdigit():
                _PID_NS = "unknown"
    return _PID_NS


def owner_in_this_namespace(instance: str) -> tuple[int, str] | None:
    """(pid, start time) of the server that made ``instance`` (``<pid>.<start time>.<PID
    namespace>.<random>``, see hygiene.instance_id), when it ran in this process's PID
    namespace; None for anything else (another namespace's server, an older id without its
    namespace, a malformed one): such an owner's pid means nothing here, so it is never
    judged dead."""
    parts = instance.split(".")
    if len(parts) != 4 or not parts[0].isdigit():
        return None
    ns = pid_namespace()
    if ns == "unknown" or parts[2] != ns:
        return None
    return int(parts[0]), parts[1]


def start_time(pid: int) -> str | None:
    """An opaque start-time token, so a reused pid is not mistaken for the original."""
    if LINUX:
        fields = stat_fields(pid)
        return fields[19] if fields else None
    try:
        import psutil

        return f"{psutil.Process(pid).create_time():.3f}"
    except Exception:
        return None


def children(pid: int) -> list[int]:
    """Direct children of pid."""
    if LINUX:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return []
        return _task_children(pid, tids)
    try:
        import psutil

        return [c.pid for c in psutil.Process(pid).children()]
    except Exception:
        return []


def own_children() -> list[int]:
    """Children of this process that the main thread or the calling thread forked, or that
    were reparented to us (the kernel hands orphans to the main thread): two reads instead of
    one per thread."""
    if not LINUX:
        return children(os.getpid())
    me = os.getpid()
    return _task_children(me, {me, threading.get_native_id()})


def _task_children(pid: int, tids: Iterable[int | str]) -> list[int]:
    """The children that these threads of ``pid`` forked (or were handed, as orphans)."""
    out: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                out.extend(int(x) for x in f.read().split())
        except OSError:
            continue
    return out


def descendants(roots: set[int] | list[int]) -> set[int]:
    """All descendants of the given pids (not including the roots)."""
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        for c in children(stack.pop()):
            if c not in seen:
                seen.add(c)
                stack.append(c)
    return seen


def environ_value(pid: int, key: bytes) -> bytes | None:
    """The value of one environment variable of a process (as it was at exec)."""
    if LINUX:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                data = f.read()
        except OSError:
            return None
        needle = key + b"="
        if data.startswith(needle):
            i = 0
        else:
            i = data.find(b"\0" + needle)
            if i < 0:
                return None
            i += 1
        j = data.find(b"\0", i)
        return data[i + len(needle) : j if j >= 0 else len(data)]
    try:
        import psutil

        v = psutil.Process(pid).environ().get(key.decode())
        return v.encode() if v is not None else None
    except Exception:
        return None


def all_pids() -> list[int]:
    if LINUX:
        return [int(n) for n in os.listdir("/proc") if n.isdigit()]
    import psutil

    return psutil.pids()


def scan_environ(key: bytes, prefix: bytes) -> dict[int, bytes]:
    """Every process whose environment has key=<value starting with prefix>."""
    me = os.getpid()
    out: dict[int, bytes] = {}
    for pid in all_pids():
        if pid == me:
            continue
        v = environ_value(pid, key)
        if v is not None and v.startswith(prefix):
            out[pid] = v
    return out


def wchan(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/wchan") as f:
            return f.read().strip()
    except OSError:
        return ""


def exe(pid: int) -> str | None:
    """The path of the program ``pid`` runs, when that path names the very file here; None
    when it does not (a file of another mount namespace, replaced or removed since) or the
    process is gone."""
    try:
        path = os.readlink(f"/proc/{pid}/exe")
        running, here = os.stat(f"/proc/{pid}/exe"), os.stat(path)
    except OSError:
        return None
    return path if (running.st_dev, running.st_ino) == (here.st_dev, here.st_ino) else None


def fd_target(pid: int, fd: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return ""


def _scan(tag_key: bytes, sids: set[str], tagged: Callable[[bytes], bool]) -> set[int]:
    """One pass over the process table: every live process in one of ``sids`` (as session or
    group) or whose tag value ``tagged`` accepts."""
    me = os.getpid()
    out: set[int] = set()
    if not LINUX:
        import psutil

        key = tag_key.decode()
        for p in psutil.process_iter():
            try:
                if p.pid == me:
                    continue
                if str(os.getpgid(p.pid)) in sids or str(os.getsid(p.pid)) in sids:
                    out.add(p.pid)
                    continue
                value = p.environ().get(key)
                if value is not None and tagged(value.encode()):
                    out.add(p.pid)
            except Exception:
                continue
        return out
    for pid in all_pids():
        if pid == me:
            continue
        fields = stat_fields(pid)
        if not fields or fields[0] in ("Z", "X"):
            continue
        if fields[2] in sids or fields[3] in sids:
            out.add(pid)
            continue
        v = environ_value(pid, tag_key)
        if v is not None and tagged(v):
            out.add(pid)
    return out


def scan_job(pgid: int, sid: int, tag_key: bytes, tag: bytes) -> set[int]:
    """One pass over the process table: members of the job's group or session, or tagged."""
    return _scan(tag_key, {str(pgid), str(sid)}, tag.__eq__)


def scan_jobs(tag_key: bytes, sids: set[str], tags: set[bytes]) -> set[int]:
    """Every live process of some jobs, in one pass: in one of their sessions or groups
    (``sids``), or carrying one of their ``tags`` — what the engine's drivers stop at shutdown."""
    return _scan(tag_key, sids, tags.__contains__)


def scan_instance(tag_key: bytes, prefix: bytes) -> set[int]:
    """Every live process whose tag starts with ``prefix``: whatever a runtime started that
    escaped its owner (the final sweep at shutdown)."""
    return _scan(tag_key, set(), lambda v: v.startswith(prefix))


def ignored(pid: int) -> int:
    """The process's mask of ignored signals (bit N-1: signal N), 0 if unknown."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigIgn:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return 0

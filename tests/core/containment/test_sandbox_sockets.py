"""Issue 22 §2: ``sandbox_sockets``, the host Unix sockets a ``network: off`` job may still
connect to (core/containment/unotify.py). Real sockets, a real Landlock + seccomp job: the
allowed one connects, nothing else does, and the job cannot win a race against the check
(rewriting the address, replacing the socket file, a symlink)."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator

import pytest
from sandbox_backends import BACKENDS, backend_settings, kind

import conch

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap")]
PY = os.path.realpath(sys.executable)


class Listener:
    """A host Unix socket that answers each connection with its own word."""

    def __init__(self, path: str, word: bytes) -> None:
        self.path, self.word, self.hits = path, word, 0
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(path)
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                c, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.hits += 1
            try:
                c.sendall(self.word)
            except OSError:
                pass
            c.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def base() -> Iterator[str]:
    d = tempfile.mkdtemp(prefix="conch-sk-", dir="/var/tmp")
    os.mkdir(os.path.join(d, "ws"))
    os.mkdir(os.path.join(d, "host"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def sockets(base) -> Iterator[tuple[Listener, Listener]]:
    ok = Listener(os.path.join(base, "host", "ok.sock"), b"OK")
    no = Listener(os.path.join(base, "host", "no.sock"), b"NO")
    yield ok, no
    ok.close()
    no.close()


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


def cfg(base: str, allowed: list[str], **settings: object) -> conch.Config:
    return conch.Config(
        result_detail="full",
        data_dir=os.path.join(base, "data"),
        default_cwd=os.path.join(base, "ws"),
        sandbox_backend=settings.pop("sandbox_backend", "landlock"),  # type: ignore[arg-type]
        sandbox_sockets=allowed,
        **settings,  # type: ignore[arg-type]
    )


_CONNECT = r"""
import errno, socket, sys
for p in sys.argv[1:]:
    kind = socket.SOCK_DGRAM if p.startswith("dgram:") else socket.SOCK_STREAM
    p = p.removeprefix("dgram:")
    s = socket.socket(socket.AF_UNIX, kind)
    s.settimeout(3)  # (a non-blocking descriptor underneath)
    try:
        if kind == socket.SOCK_DGRAM:
            s.sendto(b"x", p)
            print(p, "sent")
        else:
            s.connect(p)
            print(p, "connected", s.recv(8).decode() or "-")
    except OSError as e:
        print(p, "refused", errno.errorcode.get(e.errno, e.errno))
"""


async def test_only_the_allowed_socket_connects_whatever_name_the_job_gives(base, sockets, backend):
    ok, no = sockets
    alias = os.path.join(base, "host", "alias.sock")
    os.symlink(ok.path, alias)  # a name not on the list, for the allowed socket
    rel = os.path.relpath(ok.path, os.path.join(base, "ws"))
    async with conch.Runtime(cfg(base, [ok.path], **backend_settings(backend))) as rt:
        info = (await rt.call_tool("info", {}))["sandbox"]
        assert info["sockets"] == [ok.path] and info["backend"] == kind(backend)
        names = [ok.path, "/" + ok.path.replace("/host/", "/host/./"), no.path, alias, rel]
        r = await rt.call_tool(
            "exec",
            {"argv": [PY, "-c", _CONNECT, *names], "sandbox": "read-only", "network": "off"},
        )
        got = dict(line.split(" ", 1) for line in r["output"].splitlines())
        assert got[ok.path] == "connected OK", r
        assert got[names[1]] == "connected OK", r  # the same path, spelt otherwise
        assert got[no.path] == "refused EACCES", r
        assert got[alias] == "refused EACCES", r
        assert got[rel] == "refused EACCES", r  # relative to the job's directory: never
        # a descendant has the same filter, and the same broker
        r = await rt.call_tool(
            "exec",
            {
                "command": f"bash -c '{PY} -c \"$0\" {ok.path} {no.path}' '{_CONNECT}'",
                "sandbox": "read-only",
                "network": "off",
            },
        )
        got = dict(line.split(" ", 1) for line in r["output"].splitlines())
        assert got == {ok.path: "connected OK", no.path: "refused EACCES"}, r
        # from another thread of the job (the notification names the thread)
        threaded = (
            "import socket, sys, threading\n"
            "def go():\n"
            "    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
            "    print(s.recv(2).decode())\n"
            "t = threading.Thread(target=go); t.start(); t.join()\n"
        )
        r = await rt.call_tool(
            "exec",
            {"argv": [PY, "-c", threaded, ok.path], "sandbox": "read-only", "network": "off"},
        )
        assert r["output"] == "OK\n", r
        # with the network on nothing is brokered (and every socket is reachable, as always)
        r = await rt.call_tool(
            "exec", {"argv": [PY, "-c", _CONNECT, no.path], "sandbox": "read-only"}
        )
        assert r["output"] == f"{no.path} connected NO\n", r
        broker = rt.engine.spawn.containment.broker
        assert broker is not None
        for _ in range(50):  # each job's supervisor ends with the job
            if broker.active() == 0:
                break
            await asyncio.sleep(0.05)
        assert broker.active() == 0
    assert no.hits == 1  # only the network-on job reached it


async def test_a_datagram_or_an_abstract_name_is_not_passed_through(base, sockets, backend):
    ok, _ = sockets
    dg = os.path.join(base, "host", "dg.sock")
    d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    d.bind(dg)
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind(f"\0conch-sk-{os.getpid()}")
    abstract.listen(1)
    prog = _CONNECT + (
        "s = socket.socket(socket.AF_UNIX); s.settimeout(2)\n"
        f"try:\n    s.connect('\\0conch-sk-{os.getpid()}'); print('abstract connected')\n"
        "except OSError as e:\n    print('abstract refused', errno.errorcode[e.errno])\n"
    )
    try:
        async with conch.Runtime(cfg(base, [ok.path, dg], **backend_settings(backend))) as rt:
            r = await rt.call_tool(
                "exec",
                {"argv": [PY, "-c", prog, f"dgram:{dg}"], "sandbox": "read-only", "network": "off"},
            )
        lines = r["output"].splitlines()
        assert lines == [f"{dg} refused EACCES", "abstract refused EACCES"], r
    finally:
        d.close()
        abstract.close()


_RACE = r"""
import ctypes, socket, struct, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
ok, no = (p.encode() for p in sys.argv[1:3])
size = 2 + 108
addr = ctypes.create_string_buffer(struct.pack("=H", socket.AF_UNIX) + ok, size)
stop = False
def flip():
    a = struct.pack("=H", socket.AF_UNIX) + ok + b"\0" * (108 - len(ok))
    b = struct.pack("=H", socket.AF_UNIX) + no + b"\0" * (108 - len(no))
    while not stop:
        ctypes.memmove(addr, b, size)
        ctypes.memmove(addr, a, size)
t = threading.Thread(target=flip); t.start()
got = {}
# (at least argv[3] connects, and on until one reached the allowed socket: under load the
# flipper can hold the other name through every one of a fixed count)
for i in range(50 * int(sys.argv[3])):
    if i >= int(sys.argv[3]) and got.get("OK"):
        break
    s = socket.socket(socket.AF_UNIX)
    r = libc.connect(s.fileno(), addr, size)
    word = s.recv(2).decode() if r == 0 else "refused"
    got[word] = got.get(word, 0) + 1
    s.close()
stop = True; t.join()
print(sorted(got.items()))
"""


async def test_rewriting_the_address_while_it_is_checked_never_reaches_another_socket(
    base, sockets, backend
):
    """A second thread swaps the address between the allowed path and another one while
    the first connects: Conch reads it once and connects what it read, so a connect either
    reaches the allowed socket or is refused, never the other one."""
    ok, no = sockets
    async with conch.Runtime(cfg(base, [ok.path], **backend_settings(backend))) as rt:
        r = await rt.call_tool(
            "exec",
            {
                "argv": [PY, "-c", _RACE, ok.path, no.path, "400"],
                "sandbox": "read-only",
                "network": "off",
                "timeout_ms": 60000,
            },
        )
    assert r["exit_code"] == 0, r
    counts = dict(eval(r["output"]))  # [('OK', n), ('refused', m)]
    assert set(counts) <= {"OK", "refused"}, r
    assert counts.get("OK", 0) > 0, r  # (the check ran both ways)
    assert no.hits == 0


_REPLACE = r"""
import errno, os, socket, sys
p, other = sys.argv[1:3]
os.unlink(p)
mine = socket.socket(socket.AF_UNIX); mine.bind(p); mine.listen(1)  # the job's own, same name
def attempt(label):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(p); print(label, "connected")
    except OSError as e:
        print(label, "refused", errno.errorcode[e.errno])
attempt("own")
mine.close(); os.unlink(p); os.symlink(other, p)  # the name now leads to another socket
attempt("symlink")
"""


async def test_a_job_that_replaces_the_allowed_socket_file_reaches_nothing(base, sockets, backend):
    """The allowed socket lies in the workspace, where a workspace-write job may replace it:
    by a socket of its own, then by a symlink to another host socket. Conch opens the path
    without following symlinks and checks it is the socket the server started with."""
    _, no = sockets
    os.mkdir(os.path.join(base, "ws", "sub"))  # (Landlock: no top-level entry is replaced)
    inside = Listener(os.path.join(base, "ws", "sub", "app.sock"), b"AP")
    try:
        async with conch.Runtime(cfg(base, [inside.path], **backend_settings(backend))) as rt:
            r = await rt.call_tool(
                "exec",
                {
                    "argv": [PY, "-c", _REPLACE, inside.path, no.path],
                    "sandbox": "workspace-write",
                    "network": "off",
                },
            )
        assert r["output"].splitlines() == ["own refused EACCES", "symlink refused EACCES"], r
        assert no.hits == 0
    finally:
        inside.close()


async def test_an_allow_list_the_server_cannot_honour_stops_it_at_start(base):
    bad = [
        ({"allowed": ["relative.sock"]}, "not an absolute path"),
        ({"allowed": [os.path.join(base, "missing.sock")]}, "No such file"),
        ({"allowed": [os.path.join(base, "ws")]}, "not a Unix socket"),
    ]
    for given, message in bad:
        settings = dict(given)
        allowed = settings.pop("allowed")
        with pytest.raises(conch.ConfigError, match=message):
            async with conch.Runtime(cfg(base, allowed, **settings)):  # type: ignore[arg-type]
                pass


def test_the_address_rule_is_exact_about_what_names_an_allowed_socket():
    """``unotify.decide`` (pure): only an absolute AF_UNIX path that normalises to a name on the
    list; bytes after the first NUL are ignored (as the kernel does)."""
    from conch.core.containment.unotify import Allowed, decide

    a = Allowed(frozenset({"/run/x.sock", "/var/run/x.sock"}), "/run/x.sock", 1, 2)

    def sun(path: bytes, family: int = socket.AF_UNIX) -> bytes:
        return family.to_bytes(2, sys.byteorder) + path

    assert decide(sun(b"/run/x.sock"), (a,)) is a
    assert decide(sun(b"/var/run/x.sock\0junk"), (a,)) is a
    assert decide(sun(b"//run/./x.sock"), (a,)) is a
    assert decide(sun(b"/run/../run/x.sock"), (a,)) is a
    for other in (b"/run/y.sock", b"run/x.sock", b"\0/run/x.sock", b"", b"/run/x.sock2"):
        assert decide(sun(other), (a,)) is None, other
    assert decide(sun(b"/run/x.sock", socket.AF_INET), (a,)) is None
    assert decide(b"\x01", (a,)) is None
    assert decide(sun(b"/" * 200 + b"run/x.sock"), (a,)) is None  # past sun_path


async def test_a_shell_and_a_terminal_job_get_the_same_broker(base, sockets, backend):
    """A persistent shell opened under ``network: off`` (its commands inherit the filter) and
    a PTY job reach the allowed socket and nothing else."""
    ok, no = sockets
    async with conch.Runtime(cfg(base, [ok.path], **backend_settings(backend))) as rt:
        sh = await rt.shell_open(sandbox="read-only", network="off")
        probe = f"{PY} -c '{_CONNECT}' {ok.path} {no.path}"
        for _ in range(2):  # (the second command: the same shell, the same listener)
            r = await rt.exec(shell_id=sh["shell_id"], command=probe)
            got = dict(line.split(" ", 1) for line in r["output"].splitlines())
            assert got == {ok.path: "connected OK", no.path: "refused EACCES"}, r
        await rt.shell_close(sh["shell_id"])
        r = await rt.exec(command=probe, pty=True, sandbox="read-only", network="off")
        lines = [ln for ln in r["output"].replace("\r", "").splitlines() if ln]
        assert lines == [f"{ok.path} connected OK", f"{no.path} refused EACCES"], r
    assert no.hits == 0


_PARKED = r"""
import socket, sys
socks = []
for i in range(8):  # (a backlog of 1: the second or third connect waits for an accept)
    s = socket.socket(socket.AF_UNIX)
    print("connecting", i, flush=True)
    s.connect(sys.argv[1])
    socks.append(s)
print("all connected", flush=True)
"""


async def test_a_connect_parked_on_a_full_backlog_waits_and_ends_with_its_job(base, backend):
    """A blocking connect to an allowed socket that accepts nothing waits as a blocking
    connect does, is connected once the listener accepts, and a job killed while it waits
    leaves no supervisor behind (one parked in connect(2) would hold its thread and the
    job's descriptors for good)."""
    path = os.path.join(base, "host", "full.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(1)
    accepted: list[socket.socket] = []
    try:
        async with conch.Runtime(cfg(base, [path], **backend_settings(backend))) as rt:
            broker = rt.engine.spawn.containment.broker
            assert broker is not None
            run = {"argv": [PY, "-c", _PARKED, path], "sandbox": "read-only", "network": "off"}
            # parked, then killed
            r = await rt.call_tool("exec", {**run, "yield_ms": 1500})
            assert r["state"] == "running" and "all connected" not in r["output"], r
            await rt.call_tool("signal", {"job_id": r["job_id"], "signal": "kill"})
            for _ in range(100):
                if broker.active() == 0:
                    break
                await asyncio.sleep(0.05)
            assert broker.active() == 0, "a supervisor stayed parked in connect"
            # parked, then let through: the job's connects all land, none refused
            while True:  # (empty the backlog the killed job left)
                srv.settimeout(0.1)
                try:
                    srv.accept()[0].close()
                except TimeoutError:
                    break
            r = await rt.call_tool("exec", {**run, "yield_ms": 1000})
            assert r["state"] == "running", r
            srv.settimeout(5)
            for _ in range(8):
                accepted.append(srv.accept()[0])
            r = await rt.call_tool(
                "read", {"job_id": r["job_id"], "until": "exit", "wait_ms": 10000}
            )
            assert r["state"] == "exited" and r["exit_code"] == 0, r
            assert "all connected" in r["output"], r
    finally:
        for c in accepted:
            c.close()
        srv.close()

"""Fixtures for driving real MCP hosts (Codex CLI, Claude Code) offline against a scripted fake
model, with Conch as their MCP server.

- ``npm_install``: installs a pinned npm package once into the gitignored ``.cache/hosts/``.
- ``loopback``: keeps the host on loopback. Every proxy variable points at a recorder that
  refuses and records each request, so an attempt to go off-box fails the test. Where we may
  (root, ``unshare``), the host and the fake servers also run in a network namespace that has
  only ``lo``, so nothing can leave even if a client ignores the proxy variables.
- ``logged_conch``: a wrapper script around ``bin/conch serve`` that tees its stdio, so a test
  can read the JSON-RPC traffic between the host and Conch (``initialize``, cancellations).
- ``spawn``: starts a host in a session of its own; teardown kills the whole tree, the jobs
  Conch started included.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import psutil
import pytest
import system_tools
from procs import reap_zombie_children

# the fake model modules next to this file (fake_responses.py, fake_messages.py) import by name
sys.path.insert(0, str(Path(__file__).resolve().parent))

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "hosts"
CONCH = REPO / "bin" / "conch"
# set in the environment of the logged Conch server; its jobs inherit it, so teardown finds
# every process of a test's run even once it has left the host's process tree
RUN_MARK = "CONCH_HOSTS_TEST_RUN"

T = TypeVar("T")


# --- npm -----------------------------------------------------------------------------------


def _installed_version(prefix: Path, package: str) -> str | None:
    manifest = prefix / "node_modules" / package / "package.json"
    try:
        return json.loads(manifest.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def npm_install_pinned(cache_name: str, package: str, version: str, binary_glob: str) -> Path:
    """The file matching ``binary_glob`` under ``.cache/hosts/<cache_name>`` after ``npm install
    package@version`` there, which runs only if that version is not installed yet (a lock keeps
    parallel test workers, and bin/test's prefetch, from installing at once)."""
    prefix = CACHE / cache_name
    prefix.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{cache_name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = sorted(prefix.glob(binary_glob))
        if not (found and _installed_version(prefix, package) == version):
            if shutil.which("npm") is None:
                system_tools.require("npm")
            spec = f"{package}@{version}"
            try:
                r = subprocess.run(
                    [
                        *("npm", "install", "--prefix", str(prefix)),
                        *("--no-audit", "--no-fund", "--loglevel=error", spec),
                    ],
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                failure = (r.stderr or r.stdout).strip()[-600:] if r.returncode else ""
            except subprocess.TimeoutExpired:
                failure = "timed out after 600 s"
            if failure:
                system_tools.unavailable(
                    f"{spec} (npm install into {prefix} failed: {failure})",
                    f"check that npm can reach its registry, then rerun; or run: npm install"
                    f" --prefix {prefix} --no-audit --no-fund {spec}",
                )
            found = sorted(prefix.glob(binary_glob))
        if not found:
            system_tools.unavailable(
                f"{package}@{version} installed into {prefix} but no {binary_glob}",
                "this platform may have no native build of it",
            )
        return found[0]


@pytest.fixture(scope="session")
def npm_install() -> Callable[[str, str, str, str], Path]:
    """``install(cache_name, package, version, binary_glob)``: ``npm_install_pinned``."""
    return npm_install_pinned


# --- loopback only ---------------------------------------------------------------------------

_CLONE_NEWNET = 0x40000000
_SIOCSIFFLAGS = 0x8914
_IFF_UP, _IFF_LOOPBACK, _IFF_RUNNING = 0x1, 0x8, 0x40


def _enter_new_netns() -> int:
    """Move the calling thread into a new network namespace with ``lo`` up; return a
    descriptor of the namespace (it keeps it alive and ``nsenter`` enters it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = _IFF_UP | _IFF_LOOPBACK | _IFF_RUNNING
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags))
    return os.open(f"/proc/self/task/{threading.get_native_id()}/ns/net", os.O_RDONLY)


class ProxyRecorder:
    """A loopback HTTP proxy that forwards nothing: it records the first line of every request
    (``CONNECT host:443 HTTP/1.1``, ``GET http://host/ HTTP/1.1``) and answers 403."""

    def __init__(self) -> None:
        self.attempts: list[str] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                data = b""
                with contextlib.suppress(OSError):
                    while b"\n" not in data and len(data) < 8192:
                        chunk = conn.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                line = data.split(b"\n", 1)[0].decode("latin-1").strip()
                self.attempts.append(line or "(a connection that sent nothing)")
                with contextlib.suppress(OSError):
                    conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
        self._thread.join(timeout=2)


@dataclass
class Loopback:
    """Where a host runs: ``start(factory)`` builds a server in the namespace (a socket belongs
    to the namespace of the thread that made it), ``argv(cmd)`` wraps a command to run there,
    ``env`` holds the proxy variables, and ``attempts`` what reached the recorder."""

    netns_fd: int | None
    executor: ThreadPoolExecutor | None
    proxy: ProxyRecorder = field(init=False)

    def __post_init__(self) -> None:
        self.proxy = self.start(ProxyRecorder)

    def start(self, factory: Callable[[], T]) -> T:
        if self.executor is None:
            return factory()
        return self.executor.submit(factory).result()

    def argv(self, cmd: list[str]) -> list[str]:
        if self.netns_fd is None:
            return cmd
        return ["nsenter", f"--net=/proc/self/fd/{self.netns_fd}", "--", *cmd]

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return () if self.netns_fd is None else (self.netns_fd,)

    @property
    def env(self) -> dict[str, str]:
        url = self.proxy.url
        proxies = {v: url for v in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")}
        proxies |= {k.lower(): v for k, v in proxies.items()}
        return proxies | {"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}

    @property
    def attempts(self) -> list[str]:
        return list(self.proxy.attempts)

    @property
    def isolated(self) -> bool:
        return self.netns_fd is not None


@pytest.fixture
def loopback() -> Iterator[Loopback]:
    executor: ThreadPoolExecutor | None = None
    fd: int | None = None
    if os.geteuid() == 0 and shutil.which("nsenter"):
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="netns")
        try:
            fd = executor.submit(_enter_new_netns).result()
        except OSError:  # no CAP_SYS_ADMIN here (a container): the proxy recorder alone
            executor.shutdown()
            executor = None
    lb = Loopback(fd, executor)
    try:
        yield lb
    finally:
        lb.proxy.close()
        if executor is not None:
            executor.shutdown()
        if fd is not None:
            os.close(fd)


# --- Conch with its stdio logged ---------------------------------------------------------------


@dataclass(frozen=True)
class LoggedConch:
    """``command`` runs ``bin/conch serve`` with a private data dir; what the host wrote to it
    goes to ``to_conch``, what it answered to ``from_conch`` (JSON-RPC, one message a line)."""

    command: Path
    to_conch: Path
    from_conch: Path
    stderr: Path

    def sent(self) -> list[dict[str, Any]]:
        return _json_lines(self.to_conch)

    def received(self) -> list[dict[str, Any]]:
        return _json_lines(self.from_conch)

    def requests(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.sent() if m.get("method") == method]


def _json_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


@pytest.fixture
def logged_conch(tmp_path: Path) -> LoggedConch:
    logs = tmp_path / "conch-stdio"
    logs.mkdir()
    c = LoggedConch(
        tmp_path / "conch-serve",
        logs / "to_conch.jsonl",
        logs / "from_conch.jsonl",
        logs / "stderr.log",
    )
    q = {k: shlex.quote(str(v)) for k, v in vars(c).items()}
    data = shlex.quote(str(tmp_path / "data"))
    c.command.write_text(
        "#!/bin/bash\n"
        f"# bin/conch serve, its stdin and stdout teed to {logs}\n"
        f"export {RUN_MARK}={shlex.quote(str(tmp_path))}\n"
        f"exec 2>>{q['stderr']}\n"
        f"tee -a {q['to_conch']} | {shlex.quote(str(CONCH))} serve --data-dir {data}"
        f" | tee -a {q['from_conch']}\n"
    )
    c.command.chmod(0o755)
    return c


# --- processes -----------------------------------------------------------------------------------


def _marked(tmp: Path) -> list[psutil.Process]:
    mark = f"{RUN_MARK}={tmp}".encode()
    found = []
    for p in psutil.process_iter():
        with contextlib.suppress(OSError), open(f"/proc/{p.pid}/environ", "rb") as f:
            if mark in f.read().split(b"\0"):
                found.append(p)
    return found


def kill_tree(proc: subprocess.Popen[bytes], tmp: Path) -> None:
    """Kill ``proc``, its process group, its descendants and every process marked with this
    run's ``RUN_MARK`` (Conch's jobs run in sessions of their own), then reap ``proc``."""
    victims: list[psutil.Process] = []
    with contextlib.suppress(psutil.Error):
        victims = psutil.Process(proc.pid).children(recursive=True)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while True:
        # the host's children that outlived it came back to this process (a subreaper):
        # those of its session are its tree too (the MCP server it started)
        left = [p for p in {*victims, *_marked(tmp), *_orphans_of(proc.pid)} if p.is_running()]
        for p in left:
            with contextlib.suppress(psutil.Error):
                if p.status() != psutil.STATUS_ZOMBIE:
                    p.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(0.1)
        alive = [p for p in left if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        if (not alive and proc.poll() is not None) or time.monotonic() > deadline:
            break
    while _orphans_of(proc.pid) and time.monotonic() < deadline + 5:
        reap_zombie_children(0.2)
    reap_zombie_children(0.5)


def _orphans_of(sid: int) -> list[psutil.Process]:
    """This process's children in session ``sid`` (orphans of a host started in it)."""
    found = []
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error, OSError):
            if os.getsid(child.pid) == sid:
                found.append(child)
    return found


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """``spawn(argv, **popen_kwargs)``: a process in a new session; killed with its whole tree
    (and the jobs of the Conch it ran) on teardown."""
    started: list[subprocess.Popen[bytes]] = []

    def start(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(argv, start_new_session=True, **kwargs)
        started.append(proc)
        return proc

    try:
        yield start
    finally:
        for proc in started:
            kill_tree(proc, tmp_path)

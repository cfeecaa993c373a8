"""Connections to the HTTP service over real sockets: a connection that sends no complete
request head in 5 s is closed, open connections are capped per peer user (and in all, below the
descriptor limit, which the server raises at start), and running out of descriptors gives
refusals, never a spinning accept loop. The servers run under `prlimit`, as a systemd user
service's 1024 descriptors would have them."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import time
from pathlib import Path

from frontend_servers import HttpServer, agent_call, http_get, kill_group, start_http
from local_user import PYTHON, LocalUser

TOKEN = "tok-conns-4Fq9-secret"
HEAD = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"  # never finished
# 1024 descriptors, not to be raised: the caps follow (512 connections, 128 per peer)
NOFILE_1024 = ("prlimit", "--nofile=1024:1024", "--")
# run by the other user: open N connections that send half a request head, then say after
# `wait` seconds how many the server has answered 503 or closed, and how many are still open
HOLD = r"""
import json, select, socket, sys, time
port, n, wait = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
socks, failed = [], 0
for _ in range(n):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        socks.append(s)
    except OSError:
        failed += 1
print(json.dumps({"opened": len(socks), "failed": failed}), flush=True)
sys.stdin.readline()  # the test says when to look
time.sleep(wait)
refused = closed = open_ = 0
for s in socks:
    s.setblocking(False)
    try:
        data = s.recv(4096)
    except BlockingIOError:
        open_ += 1
        continue
    except OSError:
        closed += 1
        continue
    if data.startswith(b"HTTP/1.1 503"):
        refused += 1
    else:
        closed += 1
print(json.dumps({"refused": refused, "closed": closed, "open": open_}), flush=True)
"""


class Holder:
    """The other user's connections (HOLD), kept open until :meth:`look`."""

    def __init__(self, user: LocalUser, port: int, n: int, wait: float = 1.0) -> None:
        self.proc = subprocess.Popen(
            user.argv(PYTHON, "-c", HOLD, str(port), str(n), str(wait)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd="/",
            start_new_session=True,
        )
        assert self.proc.stdout is not None
        self.opened = json.loads(self.proc.stdout.readline())

    def look(self) -> dict[str, int]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        seen: dict[str, int] = json.loads(self.proc.stdout.readline())
        return seen

    def close(self) -> None:
        self.proc.kill()
        self.proc.communicate()


def closed_after(sock: socket.socket, limit: float) -> float | None:
    """Seconds until the server closes ``sock`` (None: still open after ``limit``)."""
    t0 = time.monotonic()
    sock.settimeout(limit)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return time.monotonic() - t0


def emfile_lines(srv: HttpServer) -> list[str]:
    return [
        line
        for line in srv.stderr().splitlines()
        if "Too many open files" in line or "EMFILE" in line or "out of descriptors" in line
    ]


def test_a_connection_without_a_complete_request_head_is_closed_within_seconds(
    http_server: HttpServer,
):
    t0 = time.monotonic()
    half = socket.create_connection(("127.0.0.1", http_server.port))
    half.sendall(HEAD)
    for _ in range(3):  # a byte now and then does not keep it open
        time.sleep(1)
        half.sendall(b"X")
    assert closed_after(half, 10) is not None
    half.close()
    assert 4.5 <= time.monotonic() - t0 <= 8
    # after a response, the next head is due within the same time
    conn = socket.create_connection(("127.0.0.1", http_server.port))
    conn.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert conn.recv(4096).startswith(b"HTTP/1.1 200")
    t0 = time.monotonic()
    for _ in range(4):
        conn.sendall(b"G")  # the next request trickles in
        time.sleep(1)
    assert closed_after(conn, 10) is not None
    conn.close()
    assert time.monotonic() - t0 <= 8
    # a request sent whole is served, however long it takes
    assert agent_call(http_server, "exec", {"command": "sleep 6; echo slow"})["output"] == "slow\n"


def test_the_soft_descriptor_limit_is_raised_to_the_hard_limit(tmp_path: Path):
    srv = start_http(tmp_path, prefix=("prlimit", "--nofile=1024:4096", "--"))
    try:
        with open(f"/proc/{srv.proc.pid}/limits") as f:
            line = next(row for row in f if row.startswith("Max open files"))
        assert line.split()[3:5] == ["4096", "4096"], line
        assert "1024" not in line
    finally:
        kill_group(srv.proc)


def test_another_users_half_open_connections_leave_the_agent_served(
    tmp_path: Path, other_user: LocalUser
):
    """The red team's attack: a local user holds ~1100 half-open requests against a server with
    1024 descriptors and a token. It gets its share (128) and the rest are refused at once; the
    agent is served at once; no descriptor runs out; the held ones are closed within seconds."""
    srv = start_http(tmp_path, "--auth-token", TOKEN, token=TOKEN, prefix=NOFILE_1024)
    holder = Holder(other_user, srv.port, 1100, wait=0)
    try:
        assert holder.opened["opened"] + holder.opened["failed"] == 1100, holder.opened
        t0 = time.monotonic()
        ok = agent_call(srv, "exec", {"command": "echo ok"})
        assert ok.get("output") == "ok\n" and time.monotonic() - t0 < 5, ok
        fds = len(os.listdir(f"/proc/{srv.proc.pid}/fd"))
        assert fds < 512, fds  # the attacker's share and the server's own, not the limit
        seen = holder.look()
        assert seen["open"] <= 128 and seen["refused"] >= 1100 - 128 - 20, seen
        time.sleep(6)  # past the head timeout: the held ones are gone
        fds_after = len(os.listdir(f"/proc/{srv.proc.pid}/fd"))
        assert fds_after < fds - 100, (fds, fds_after)
    finally:
        holder.close()
        kill_group(srv.proc)
    assert emfile_lines(srv) == []


def test_connections_are_capped_per_peer_user_and_the_excess_answered_503(
    tmp_path: Path, other_user: LocalUser
):
    srv = start_http(tmp_path, prefix=NOFILE_1024)
    holder = Holder(other_user, srv.port, 300)
    try:
        assert holder.opened["opened"] == 300, holder.opened
        seen = holder.look()  # a second after the last was opened
        assert seen["open"] == 128, seen  # a quarter of the 512 connections of 1024 fds
        assert seen["refused"] == 300 - 128, seen
        assert http_get(srv, "/health")[0] == 200  # the server's user: a count of its own
    finally:
        holder.close()
        kill_group(srv.proc)


def first_lines(socks: list[socket.socket], within_s: float) -> list[bytes]:
    """Each socket's first response line, waiting for all of them together at most
    ``within_s`` (under load the server answers late, not never); an unanswered one is
    ``b"no answer"``, a reset its error."""
    got: dict[socket.socket, bytes] = {}
    deadline = time.monotonic() + within_s
    while len(got) < len(socks) and time.monotonic() < deadline:
        waiting = [s for s in socks if s not in got]
        ready, _, _ = select.select(waiting, [], [], max(0.0, deadline - time.monotonic()))
        for s in ready:
            try:
                got[s] = s.recv(4096).split(b"\r\n", 1)[0]
            except OSError as e:
                got[s] = repr(e).encode()
    return [got.get(s, b"no answer") for s in socks]


def test_out_of_descriptors_the_server_refuses_without_spinning_and_recovers(tmp_path: Path):
    srv = start_http(tmp_path, prefix=NOFILE_1024)
    try:
        pid = srv.proc.pid
        used = len(os.listdir(f"/proc/{pid}/fd"))
        # leave the server a descriptor or two: connections now run it out
        subprocess.run(["prlimit", f"--pid={pid}", f"--nofile={used + 2}:1024"], check=True)
        with open(f"/proc/{pid}/stat") as f:
            cpu0 = sum(int(x) for x in f.read().split(")")[1].split()[11:13])
        socks = []
        for _ in range(40):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
            s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            socks.append(s)
        answers = first_lines(socks, within_s=30)
        time.sleep(3)
        with open(f"/proc/{pid}/stat") as f:
            cpu1 = sum(int(x) for x in f.read().split(")")[1].split()[11:13])
        for s in socks:
            s.close()
        # told so, not left hanging: 503 from the accept loop's spare descriptor, or 403
        # when the peer could not be looked up for want of one (the guard fails closed)
        told = [a for a in answers if a.split(b" ")[1:2] in ([b"503"], [b"403"])]
        assert len(told) >= 30, sorted((a, answers.count(a)) for a in set(answers))
        assert (cpu1 - cpu0) / os.sysconf("SC_CLK_TCK") < 1.5, "the server spun"
        assert len(emfile_lines(srv)) <= 2, emfile_lines(srv)[:3]
        subprocess.run(["prlimit", f"--pid={pid}", "--nofile=1024:1024"], check=True)
        time.sleep(1)
        assert http_get(srv, "/health")[0] == 200
    finally:
        kill_group(srv.proc)

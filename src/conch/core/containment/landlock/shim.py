"""The socket broker's shim under bwrap (``sandbox_sockets`` with ``network: off``): the first
program inside the sandbox. It takes the two filters Conch sends first on the job's channel
(``receive_filters``), loads the connect filter and hands its listener to Conch, loads the
``network: off`` filter that lets ``connect`` through to it, and execs the job's program. It
runs where Conch cannot be imported, on the standard library and lockdown.py only: started as
``python -I -S -c BOOT DIR --broker CHANNEL -- ARGV`` with DIR, the folder above this package,
on its path (fence.broker_shim_argv).
"""

from __future__ import annotations

import errno
import os
import socket
import struct

from . import lockdown


def receive_filters(sock: socket.socket) -> tuple[bytes, bytes]:
    """The two filters Conch sends the broker shim first on its channel: (the connect
    filter, the ``network: off`` filter), each a ``sock_filter`` array, framed as two
    native-endian 32-bit lengths and then the bytes (``fence.shim_filters``)."""
    head = _exactly(sock, 8)
    sizes = struct.unpack("=II", head)
    if not all(0 < n <= _MAX_FILTER and n % 8 == 0 for n in sizes):
        raise OSError(errno.EPROTO, f"a malformed filter from Conch ({sizes})")
    body = _exactly(sock, sizes[0] + sizes[1])
    return body[: sizes[0]], body[sizes[0] :]


_MAX_FILTER = 4096 * 8  # (BPF_MAXINSNS instructions)


def _exactly(sock: socket.socket, n: int) -> bytes:
    got = b""
    while len(got) < n:
        chunk = sock.recv(n - len(got))
        if not chunk:
            raise OSError(errno.EPROTO, "Conch's channel ended early")
        got += chunk
    return got


def broker_shim(channel: str, argv: list[str]) -> None:
    """``sandbox_sockets`` under bwrap (``--broker CHANNEL -- ARGV``),
    the first program inside the sandbox: take the two filters Conch sends over ``channel``
    (a socket bound for this one job, taken once: ``receive_filters``), hand the connect
    filter's listener to Conch over it, load the ``network: off`` filter that lets
    ``connect`` through to it, exec ``argv``. It fails closed: anything that goes wrong ends
    it (125) before the program runs. Never returns."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(30)
            sock.connect(channel)
            notify, program = receive_filters(sock)
            lockdown.no_new_privs()
            listener = lockdown.load_notify_filter(notify)
            socket.send_fds(sock, [b"L"], [listener])
            os.close(listener)
            if sock.recv(1) != b"K":
                raise OSError(errno.EPROTO, "Conch did not take the listener")
        lockdown.load_seccomp(program)
    except OSError as e:
        os.write(2, f"conch: the sandbox's socket broker failed: {e}\n".encode())
        os._exit(125)
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        os.write(2, f"conch: {argv[0]}: {e.strerror}\n".encode())
        os._exit(126 if e.errno == errno.EACCES else 127)


def main(argv: list[str]) -> None:
    """``--broker CHANNEL -- ARGV``: ``broker_shim``. Never returns."""
    if len(argv) > 3 and argv[0] == "--broker" and argv[2] == "--":
        broker_shim(argv[1], argv[3:])
    os.write(2, b"conch: the socket broker's shim takes --broker CHANNEL -- ARGV\n")
    os._exit(125)

"""A newer glibc than this host's, to run Conch on what glibc 2.39+ makes possible.

This host (and CI) run Debian 12, glibc 2.36, which cannot spawn into a cgroup. Debian 13's
``libc6`` (glibc 2.41) is fetched once from deb.debian.org over HTTPS, checked against the
SHA256 the archive's package index gives, and unpacked under ``.cache/`` (gitignored). A
Python runs on it through that glibc's own dynamic loader; what it spawns runs on the host's.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import lzma
import os
import sys
import sysconfig
import tarfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "glibc"
MIRROR = "https://deb.debian.org/debian"
SUITE = "trixie"  # Debian 13: glibc 2.41
ARCH = {"x86_64": "amd64", "aarch64": "arm64"}


def _get(url: str) -> bytes:
    last: Exception | None = None
    for attempt in range(4):
        try:
            with urllib.request.urlopen(url, timeout=60) as r:
                return bytes(r.read())
        except OSError as e:  # a flaky mirror: try again
            last = e
            time.sleep(1 + 2 * attempt)
    raise RuntimeError(f"cannot fetch {url}: {last}")


def _package(arch: str) -> tuple[str, str]:
    """(path in the archive, SHA256) of libc6 in the suite's package index."""
    index = lzma.decompress(_get(f"{MIRROR}/dists/{SUITE}/main/binary-{arch}/Packages.xz"))
    for block in index.decode().split("\n\n"):
        if block.startswith("Package: libc6\n"):
            fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
            return fields["Filename"], fields["SHA256"]
    raise RuntimeError(f"no libc6 in {SUITE}'s index")


def _data_member(deb: bytes) -> bytes:
    """The data.tar.* member of a .deb (an ar archive)."""
    if not deb.startswith(b"!<arch>\n"):
        raise RuntimeError("not a .deb")
    at = 8
    while at + 60 <= len(deb):
        name = deb[at : at + 16].decode().strip().rstrip("/")
        size = int(deb[at + 48 : at + 58].decode().strip())
        body = deb[at + 60 : at + 60 + size]
        if name.startswith("data.tar"):
            if not name.endswith((".xz", ".gz", ".tar")):
                raise RuntimeError(f"cannot unpack {name}")
            return body
        at += 60 + size + (size & 1)
    raise RuntimeError("no data.tar in the .deb")


def glibc_dir() -> Path:
    """The directory holding the newer glibc's libraries (fetched on first use)."""
    arch = ARCH.get(os.uname().machine)
    if arch is None:
        raise RuntimeError(f"no Debian libc6 for {os.uname().machine}")
    CACHE.mkdir(parents=True, exist_ok=True)
    target = CACHE / f"{SUITE}-{arch}"
    lib = target / "usr" / "lib" / f"{os.uname().machine}-linux-gnu"
    with open(CACHE / f"{SUITE}-{arch}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (lib / "libc.so.6").exists():
            path, sha = _package(arch)
            deb = _get(f"{MIRROR}/{path}")
            if hashlib.sha256(deb).hexdigest() != sha:
                raise RuntimeError(f"{path}: SHA256 differs from the index")
            with tarfile.open(fileobj=io.BytesIO(_data_member(deb))) as tar:
                # (the absolute compatibility symlinks, /lib64/ld-linux-*, are not needed)
                keep = [m for m in tar if not (m.issym() and m.linkname.startswith("/"))]
                if hasattr(tarfile, "data_filter"):
                    tar.extractall(target, members=keep, filter="data")
                else:
                    tar.extractall(target, members=keep)
    return lib


def python_on_newer_glibc() -> list[str]:
    """The command line of this Python on the newer glibc."""
    lib = glibc_dir()
    loader = next(lib.glob("ld-linux-*.so.*"))
    libdir = sysconfig.get_config_var("LIBDIR") or ""  # this Python's libpython, if shared
    return [str(loader), "--library-path", f"{lib}:{libdir}", sys.executable]

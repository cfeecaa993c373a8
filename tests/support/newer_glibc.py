"""A newer glibc than this host's, to run Conch on what glibc 2.39+ makes possible.

This host (and CI) run Debian 12, glibc 2.36, which cannot spawn into a cgroup. Debian 13's
``libc6`` (glibc 2.41) is fetched once through apt itself: a private apt state under ``.cache/``
(gitignored) with a sources list naming the archive that this machine's own apt configuration
names for its release, with the newer suite. ``apt-get update`` checks the suite's signature
against the machine's trusted keys, ``apt-get download`` the package's hash against the signed
index, and ``dpkg-deb`` unpacks it. No archive address is written here. A Python runs on it
through that glibc's own dynamic loader; what it spawns runs on the host's.

Where the machine has no such apt configuration, the tests that need it skip saying so (and
fail under ``CI=true``; see ``tests/support/system_tools.py``).
"""

from __future__ import annotations

import fcntl
import getpass
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from system_tools import unavailable

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "glibc"
SUITE = "trixie"  # Debian 13: glibc 2.41
ARCH = {"x86_64": "amd64", "aarch64": "arm64"}


def _codename() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("VERSION_CODENAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return ""


def archive_uri() -> str | None:
    """The archive this machine's apt configuration names for its own release's main
    component (``Repo-URI`` of ``apt-get indextargets``), or None."""
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        return None
    codename = _codename()
    out = subprocess.run(
        [
            "apt-get",
            "indextargets",
            "--no-release-info",
            "--format",
            "$(REPO_URI) $(RELEASE) $(COMPONENT) $(TARGET_OF)",
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[1:] == [codename, "main", "deb"]:
            return fields[0]
    return None


def _apt(root: Path, arch: str, *args: str, cwd: Path | None = None) -> None:
    options = {
        "Dir::Etc::SourceList": str(root / "sources.list"),
        "Dir::Etc::SourceParts": str(root / "sources.list.d"),
        "Dir::Etc::Preferences": str(root / "preferences"),
        "Dir::Etc::PreferencesParts": str(root / "preferences.d"),
        "Dir::State": str(root / "state"),
        "Dir::State::Lists": str(root / "state" / "lists"),
        "Dir::State::status": str(root / "status"),
        "Dir::Cache": str(root / "cache"),
        "APT::Architecture": arch,
        "APT::Architectures": arch,
        "APT::Sandbox::User": getpass.getuser(),
        "Acquire::Languages": "none",
        "Debug::NoLocking": "1",
    }
    argv = ["apt-get", "-q", *(f"-o{k}={v}" for k, v in options.items()), *args]
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[-2:])} failed ({r.returncode}): {r.stderr[-2000:]}")


def _fetch(target: Path, arch: str, uri: str) -> None:
    root = CACHE / "apt"
    shutil.rmtree(root, ignore_errors=True)
    for d in (
        "sources.list.d",
        "preferences.d",
        "state/lists/partial",
        "cache/archives/partial",
        "deb",
    ):
        (root / d).mkdir(parents=True)
    (root / "sources.list").write_text(f"deb {uri} {SUITE} main\n")
    (root / "status").write_text("")
    _apt(root, arch, "update")
    _apt(root, arch, "download", f"libc6:{arch}", cwd=root / "deb")
    (deb,) = (root / "deb").glob("libc6_*.deb")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(target)], check=True)
    shutil.rmtree(root, ignore_errors=True)


def glibc_dir() -> Path:
    """The directory holding the newer glibc's libraries (fetched on first use)."""
    arch = ARCH.get(os.uname().machine)
    if arch is None:
        unavailable(f"no Debian libc6 for {os.uname().machine}", "an x86_64 or aarch64 host")
    CACHE.mkdir(parents=True, exist_ok=True)
    target = CACHE / f"{SUITE}-{arch}"
    lib = target / "usr" / "lib" / f"{os.uname().machine}-linux-gnu"
    with open(CACHE / f"{SUITE}-{arch}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (lib / "libc.so.6").exists():
            uri = archive_uri()
            if uri is None:
                unavailable(
                    f"a newer glibc ({SUITE}'s libc6) for the clone3 tests",
                    "needs apt-get and dpkg-deb with a source for this Debian release "
                    f"({_codename() or 'unknown'}) in the apt configuration",
                )
            shutil.rmtree(target, ignore_errors=True)
            _fetch(target, arch, uri)
    return lib


def python_on_newer_glibc() -> list[str]:
    """The command line of this Python on the newer glibc."""
    lib = glibc_dir()
    loader = next(lib.glob("ld-linux-*.so.*"))
    libdir = sysconfig.get_config_var("LIBDIR") or ""  # this Python's libpython, if shared
    return [str(loader), "--library-path", f"{lib}:{libdir}", sys.executable]

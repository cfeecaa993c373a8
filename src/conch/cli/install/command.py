"""The ``install`` command's work: what to run, the file read and written, the report.

The entry starts ``conch serve`` from this installation (``bin/conch`` in a checkout, else the
``conch`` script beside this Python, else ``python -m conch``) with the settings given on the
command line and ``--host-timeout-ms`` from the host's call timeout (hosts.py). The file is
edited in place (plan.py and the *_text modules) and replaced whole, through a temporary file
in the same directory renamed over it, so a reader never sees half of it and a failure leaves
it as it was.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import stat
import sys
import tempfile
from pathlib import Path

import conch.cli.install.plan as plan
from conch.cli.install.errors import EditError, Refused
from conch.cli.install.hosts import HOSTS, NAME, Host, Places
from conch.cli.install.plan import Outcome
from conch.config import Config, parse_setting

# settings that are paths: made absolute, since the host starts Conch in a directory of its own
_PATHS = ("data_dir", "default_cwd")


class UsageError(Exception):
    pass


# -- what to run -----------------------------------------------------------------------------


def launcher() -> list[str]:
    """How to start the ``conch`` of this installation, as an absolute command."""
    here = Path(__file__).resolve()
    root = here.parents[4]  # <root>/src/conch/cli/install/command.py
    script = root / "bin" / "conch"
    if here.parents[3].name == "src" and (root / "pyproject.toml").is_file() and _runnable(script):
        return [str(script)]
    beside = Path(os.path.abspath(sys.executable)).parent / "conch"
    if _runnable(beside):
        return [str(beside)]
    return [os.path.abspath(sys.executable), "-m", "conch"]


def _runnable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def serve_argv(args: argparse.Namespace) -> list[str]:
    """``serve`` and the settings given on the command line, checked now."""
    argv = ["serve"]
    for f in Config.settings():
        text = getattr(args, f"setting_{f.name}", None)
        if text is None:
            continue
        flag = "--" + f.name.replace("_", "-")
        if f.name == "host_timeout_ms":
            raise UsageError(
                f"{flag} is what install writes, from the host's own call timeout; to raise it, "
                "raise the host's timeout in its config (install keeps a longer one) and install "
                "again"
            )
        if f.metadata.get("secret"):
            raise UsageError(
                f"{flag}: a secret does not belong in a host's config file; put "
                f"CONCH_{f.name.upper()}=... into a file (mode 0600) and pass --env-file FILE"
            )
        parse_setting(f.name, text)
        if f.name in _PATHS and text and not text.startswith("~"):
            text = os.path.abspath(text)
        argv += [flag, text]
    if getattr(args, "env_file", None):
        argv += ["--env-file", os.path.abspath(args.env_file)]
    return argv


# -- the file --------------------------------------------------------------------------------


def read(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise EditError(f"cannot read it: {e.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise EditError(f"not UTF-8 text (byte {e.start})") from None


def write(path: Path, text: str | None, *, private: bool) -> None:
    """Replace the file with ``text`` (None: delete it) all at once: a temporary file in the
    same directory, with the file's mode, flushed to disk and renamed over it. A file reached
    through a symlink is replaced where it is, and the link kept."""
    target = Path(os.path.realpath(path))
    if text is None:
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o600 if private else 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".conch-tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(text.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def diff(path: Path, before: str | None, after: str | None) -> str:
    lines = difflib.unified_diff(
        (before or "").splitlines(keepends=True),
        (after or "").splitlines(keepends=True),
        fromfile=str(path) if before is not None else "/dev/null",
        tofile=str(path) if after is not None else "/dev/null",
    )
    return "".join(x if x.endswith("\n") else x + "\n\\ No newline at end of file\n" for x in lines)


# -- the command -----------------------------------------------------------------------------


def _report(host: Host, path: Path, o: Outcome) -> str:
    restart = f"; restart {host.label} to load it"
    told = "" if o.host_timeout_ms is None else f"--host-timeout-ms {o.host_timeout_ms}, "
    if o.action == "added":
        return f"added {o.where} to {path} ({told}{host.timeout_note}){restart}"
    if o.action in ("updated", "replaced"):
        keys = f": {', '.join(o.keys)}" if o.keys else ""
        return f"{o.action} {o.where} in {path}{keys} ({told}{host.timeout_note}){restart}"
    if o.action == "unchanged":
        return f"{o.where} in {path} is already what install writes; nothing changed"
    if o.action == "removed":
        gone = "; the file held nothing else and is deleted" if o.after is None else ""
        return f"removed {o.where} from {path}{gone}"
    return f"no {NAME} entry in {path}; nothing to remove"


def run(args: argparse.Namespace) -> int:
    host = HOSTS[args.host]
    try:
        path = host.path(args.scope, Places.here())
        serve = serve_argv(args)
    except (ValueError, UsageError) as e:
        print(f"conch install: {e}", file=sys.stderr)
        return 2
    try:
        text = read(path)
        act = plan.remove if args.remove else plan.install
        outcome = act(host, text, launcher(), serve, force=args.force)
        if args.print_only:
            sys.stdout.write(diff(path, outcome.before, outcome.after) or "no change\n")
            return 0
        if outcome.changed:
            if read(path) != text:
                raise EditError("it changed while install was reading it; run install again")
            write(path, outcome.after, private=args.scope == "user")
    except EditError as e:
        print(f"conch install: {path}: {e}; the file is left as it was", file=sys.stderr)
        return 2
    except Refused as e:
        print(f"conch install: {path}: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(
            f"conch install: cannot write {path}: {e}; the file is left as it was", file=sys.stderr
        )
        return 2
    print(_report(host, path, outcome))
    return 0

"""A shell's command file: each command is written to a private file in Conch's data dir and
the shell sources it (``. FILE``), so no command text is typed where the terminal would echo
or the line editor would see it, and a command of any length or content arrives exact.

The file is rewritten in place for each command (blank-padded instead of truncated where that
is cheaper), its path is scrubbed from what the shell prints about it, and environment values
given with a command (often a secret) leave the disk as the command starts (bash), or at its
end marker at the latest.
"""

from __future__ import annotations

import contextlib
import os
import shlex

from conch.core.datadir import DataDir
from conch.core.shell.boot import env_prelude
from conch.core.shell.scrub import PathScrubber

_PAD_LIMIT = 64 * 1024


class CommandFile:
    def __init__(self, data: DataDir, shell_id: str, kind: str) -> None:
        self._data = data
        self._kind = kind
        # new_file opens without O_APPEND, so pwrite rewrites the file in place
        self.path, self._fd = data.new_file(data.tmp, shell_id, "sh")
        self._len = 0
        self._values_on_disk = False  # the file holds a command's env values
        # bash says "bash: <file>: line 1: ...", zsh "<file>:1: ..."; typed input would read
        # "bash: line 1: ..." and "zsh:1: ..."
        path = self.path.encode()
        self.scrub = (
            PathScrubber(path + b": ", b"") if kind == "bash" else PathScrubber(path, kind.encode())
        )

    def write(self, command: str, assign: dict[str, str], nonce: str) -> bytes:
        """Put ``command`` (with ``assign`` exported first) in the file; returns the line to
        type that sources it (``nonce``: the marker's, set before it runs)."""
        self._data.check_path(self.path, self._fd)
        text = env_prelude(assign) + command
        if assign and self._kind == "bash":
            # the values leave the disk as the command starts: bash's `.` has read the whole
            # file by then (where the file is read-only, the end marker blanks it instead)
            text = f": >{shlex.quote(self.path)} 2>/dev/null\n" + text
        self._values_on_disk = bool(assign)
        if not text.endswith("\n"):
            text += "\n"
        data = text.encode("utf-8", "surrogateescape")
        if len(data) < self._len:
            if self._len - len(data) <= _PAD_LIMIT:
                # blank lines are cheaper than a truncate (which can flush to disk on ext4)
                data += b"\n" * (self._len - len(data))
            else:
                os.ftruncate(self._fd, len(data))
        self._len = len(data)
        self._data.write_all(self._fd, data)
        return f"__conch_n={nonce};. {shlex.quote(self.path)}\n".encode()

    def blank(self) -> None:
        """Overwrite the command's env values (docs/spec.md §4 env) as soon as they are used."""
        if self._values_on_disk:
            self._values_on_disk = False
            with contextlib.suppress(OSError):
                os.pwrite(self._fd, b"\n" * self._len, 0)

    def close(self) -> None:
        os.close(self._fd)
        self._data.unlink(self.path)

"""What ``conch install`` can run into."""

from __future__ import annotations


class EditError(Exception):
    """A config file that cannot be read or changed safely; nothing is written (exit 2)."""


class Refused(Exception):
    """An entry install will not touch without ``--force`` (exit 1)."""

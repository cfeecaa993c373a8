"""The shell state machine: its moves, and close winning a race (docs/spec.md §4)."""

from __future__ import annotations

import pytest

from conch.core.shell.state import ShellState as S
from conch.core.shell.state import move


def test_shell_state_moves_and_close_wins():
    assert move(S.STARTING, S.READY) is S.READY
    assert move(S.READY, S.BUSY) is S.BUSY
    assert move(S.BUSY, S.EXITED) is S.EXITED
    assert move(S.EXITED, S.STARTING) is S.STARTING
    # a shell being closed stays closing whatever start or exit report
    assert move(S.CLOSING, S.READY) is S.CLOSING
    assert move(S.CLOSING, S.EXITED) is S.CLOSING
    assert move(S.CLOSING, S.CLOSED) is S.CLOSED
    assert move(S.CLOSED, S.STARTING) is S.CLOSED
    with pytest.raises(RuntimeError):
        move(S.EXITED, S.BUSY)  # a dead shell runs nothing until it is restarted

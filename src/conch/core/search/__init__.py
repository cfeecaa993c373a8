"""File search with ripgrep (SPEC §6 ``search``): :class:`Searcher` and :func:`find_rg`."""

from __future__ import annotations

from conch.core.search.engine import MODES, Searcher
from conch.core.search.rg import RgInfo, find_rg

__all__ = ["MODES", "RgInfo", "Searcher", "find_rg"]

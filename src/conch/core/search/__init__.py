"""File search with ripgrep (docs/spec.md §6 ``search``): :class:`Searcher` and :func:`find_rg`."""

from __future__ import annotations

from conch.core.search.rg import RgInfo, find_rg
from conch.core.search.searcher import Searcher

__all__ = ["RgInfo", "Searcher", "find_rg"]

"""Tool-name patterns: ``*`` matches any run of characters, everything else is literal."""

from __future__ import annotations

import re
from collections.abc import Sequence


def compile_patterns(patterns: Sequence[str]) -> re.Pattern[str] | None:
    """One regex that fully matches any of ``patterns``, or None when there are none."""
    if not patterns:
        return None
    parts = (".*".join(re.escape(piece) for piece in p.split("*")) for p in patterns)
    return re.compile("|".join(f"(?:{part})" for part in parts), re.DOTALL)


class ToolFilter:
    """Decides which tool names are tracked: ``include`` (empty means all) minus ``exclude``."""

    __slots__ = ("_cache", "_exclude", "_include")

    _CACHE_LIMIT = 4096

    def __init__(self, include: Sequence[str], exclude: Sequence[str]) -> None:
        self._include = compile_patterns(include)
        self._exclude = compile_patterns(exclude)
        self._cache: dict[str, bool] = {}

    def __call__(self, tool_name: str) -> bool:
        tracked = self._cache.get(tool_name)
        if tracked is None:
            tracked = (self._include is None or self._include.fullmatch(tool_name) is not None) and (
                self._exclude is None or self._exclude.fullmatch(tool_name) is None
            )
            if len(self._cache) >= self._CACHE_LIMIT:
                self._cache.clear()
            self._cache[tool_name] = tracked
        return tracked

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


class ToolFilter(dict[str, bool]):
    """Decides which tool names are tracked: ``include`` (empty means all) minus ``exclude``.

    ``tool_filter[name]`` is the answer. It is a dict of the answers so far, so a known
    tool costs one lookup on the hot path; past ``CACHE_LIMIT`` names it starts afresh.
    """

    __slots__ = ("_exclude", "_include")

    CACHE_LIMIT = 4096

    def __init__(self, include: Sequence[str], exclude: Sequence[str]) -> None:
        super().__init__()
        self._include = compile_patterns(include)
        self._exclude = compile_patterns(exclude)

    def __missing__(self, tool_name: str) -> bool:
        tracked = (self._include is None or self._include.fullmatch(tool_name) is not None) and (
            self._exclude is None or self._exclude.fullmatch(tool_name) is None
        )
        if len(self) >= self.CACHE_LIMIT:
            self.clear()
        self[tool_name] = tracked
        return tracked

    def __call__(self, tool_name: str) -> bool:
        return self[tool_name]

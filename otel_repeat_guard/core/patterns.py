"""Tool-name patterns: ``*`` matches any run of characters, everything else is literal.

Matching takes time linear in the name's length whatever the pattern: the pieces between
stars are found left to right with ``str.find`` (leftmost is always right when ``*`` is the
only wildcard), never by a backtracking regex, which ``*_*_*x`` against a long name of ``_``
would keep busy for minutes inside the agent's ``span.end()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final


class _Glob:
    """One pattern: a literal name, or a prefix, pieces in order, and a suffix."""

    __slots__ = ("_first", "_last", "_least", "_middle", "_star")

    def __init__(self, pattern: str) -> None:
        pieces = pattern.split("*")
        self._star = len(pieces) > 1
        self._first, self._last = pieces[0], pieces[-1] if self._star else ""
        self._middle = tuple(piece for piece in pieces[1:-1] if piece)
        self._least = len(pattern) - (len(pieces) - 1)  # the characters a match must hold

    def matches(self, name: str) -> bool:
        if not self._star:
            return name == self._first
        if len(name) < self._least or not name.startswith(self._first) or not name.endswith(self._last):
            return False
        position, end = len(self._first), len(name) - len(self._last)
        for piece in self._middle:
            found = name.find(piece, position, end)
            if found < 0:
                return False
            position = found + len(piece)
        return True


class PatternSet:
    """Any of several patterns; ``fullmatch`` answers as a regex would (a true value, or None)."""

    __slots__ = ("_globs",)

    def __init__(self, patterns: Sequence[str]) -> None:
        self._globs = tuple(_Glob(pattern) for pattern in patterns)

    def fullmatch(self, name: str) -> bool | None:
        return True if any(glob.matches(name) for glob in self._globs) else None


def compile_patterns(patterns: Sequence[str]) -> PatternSet | None:
    """A matcher that fully matches any of ``patterns``, or None when there are none."""
    return PatternSet(patterns) if patterns else None


class ToolFilter:
    """Decides which tool names are tracked: ``include`` (empty means all) minus ``exclude``.

    ``tool_filter[name]`` is the answer. The answers so far are kept in a dict, so a known
    tool costs one lookup on the hot path; past ``CACHE_LIMIT`` names it starts afresh.
    Not a ``dict`` subclass with ``__missing__``: mypyc's compiled form of that crashed.
    """

    __slots__ = ("_exclude", "_include", "answers")

    CACHE_LIMIT: Final = 4096

    def __init__(self, include: Sequence[str], exclude: Sequence[str]) -> None:
        self.answers: dict[str, bool] = {}
        """The answers so far, by tool name: a hot path may look a known tool up without a call."""
        self._include = compile_patterns(include)
        self._exclude = compile_patterns(exclude)

    def __getitem__(self, tool_name: str) -> bool:
        answer = self.answers.get(tool_name)
        return self._decide(tool_name) if answer is None else answer

    def _decide(self, tool_name: str) -> bool:
        tracked = (self._include is None or self._include.fullmatch(tool_name) is not None) and (
            self._exclude is None or self._exclude.fullmatch(tool_name) is None
        )
        if len(self.answers) >= self.CACHE_LIMIT:
            self.answers.clear()
        self.answers[tool_name] = tracked
        return tracked

    def __call__(self, tool_name: str) -> bool:
        return self[tool_name]

    def __len__(self) -> int:
        """How many answers are kept."""
        return len(self.answers)

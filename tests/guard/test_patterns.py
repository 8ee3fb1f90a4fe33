"""Tool-name patterns: '*' is the only wildcard, matches are whole-name and case-sensitive."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_repeat_guard.core.patterns import ToolFilter, compile_patterns


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [
        ("grep", "grep", True),
        ("grep", "grep2", False),
        ("grep", "xgrep", False),
        ("Grep", "grep", False),
        ("mcp.read", "mcp.read", True),
        ("mcp.read", "mcpXread", False),
        ("mcp_*", "mcp_", True),
        ("mcp_*", "mcp_fs.read", True),
        ("*_file", "read_file", True),
        ("a*b*c", "abc", True),
        ("a*b*c", "aXXbYc", True),
        ("a*b*c", "acb", False),
        ("[x]", "[x]", True),
        ("[x]", "x", False),
        ("a?", "ab", False),
        ("*", "", True),
        ("multi*", "multi\nline", True),
    ],
)
def test_pattern_semantics(pattern: str, name: str, matches: bool) -> None:
    regex = compile_patterns([pattern])
    assert regex is not None
    assert (regex.fullmatch(name) is not None) is matches


def test_no_patterns_compile_to_none() -> None:
    assert compile_patterns([]) is None


def test_filter_include_then_exclude() -> None:
    tracked = ToolFilter(include=["read_*", "grep"], exclude=["read_secret"])
    assert tracked("grep")
    assert tracked("read_file")
    assert not tracked("read_secret")
    assert not tracked("bash")
    # cached answers stay right
    assert tracked("read_file")
    assert not tracked("bash")


def test_filter_empty_include_tracks_everything_not_excluded() -> None:
    tracked = ToolFilter(include=[], exclude=["todo_write"])
    assert tracked("anything")
    assert not tracked("todo_write")
    assert ToolFilter(include=[], exclude=[])("todo_write")


def test_filter_cache_stays_bounded() -> None:
    tracked = ToolFilter(include=[], exclude=["x*"])
    for i in range(ToolFilter.CACHE_LIMIT + 10):
        assert tracked(f"tool{i}")
        assert tracked[f"tool{i}"]
    assert len(tracked) <= ToolFilter.CACHE_LIMIT
    assert not tracked("xray")
    assert not tracked["xray"]


@pytest.mark.parametrize(
    ("pattern", "name"),
    [
        ("*_*_*x", "_" * 10_240),  # took 71 s with the backtracking regex
        ("*a*a*a*b", "a" * 2_000),  # took 286 s
        ("*a*a*a*a*a*a*a*a*b", "a" * 10_000),
        ("a*" * 50 + "b", "a" * 10_000),
    ],
)
def test_adversarial_patterns_finish_in_linear_time(pattern: str, name: str) -> None:
    """An upper bound against the exponential case, not a benchmark."""
    import time

    tracked = ToolFilter(include=[], exclude=[pattern])
    started = time.perf_counter()
    assert tracked(name)  # no match: the name is tracked
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [
        ("*ab*ab", "abab", True),
        ("*ab*ab", "aba", False),
        ("a*a", "a", False),
        ("a*a", "aa", True),
        ("**", "x", True),
        ("x**y", "xy", True),
        ("*a*", "bab", True),
        ("ab*ba", "aba", False),
        ("a*x*c", "abbc", False),  # a middle piece that is not there
    ],
)
def test_overlapping_prefix_and_suffix(pattern: str, name: str, matches: bool) -> None:
    regex = compile_patterns([pattern])
    assert regex is not None
    assert (regex.fullmatch(name) is not None) is matches


@given(st.lists(st.text("ab*", max_size=8), min_size=1, max_size=3), st.text("ab", max_size=12))
def test_same_answers_as_the_regex_translation(patterns: list[str], name: str) -> None:
    """The old regex translation, on inputs too short to backtrack for long, is the oracle."""
    oracle = re.compile("|".join("(?:" + ".*".join(map(re.escape, p.split("*"))) + ")" for p in patterns), re.DOTALL)
    compiled = compile_patterns(patterns)
    assert compiled is not None
    assert (compiled.fullmatch(name) is not None) is (oracle.fullmatch(name) is not None)

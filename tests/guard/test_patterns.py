"""Tool-name patterns: '*' is the only wildcard, matches are whole-name and case-sensitive."""

from __future__ import annotations

import pytest

from otel_repeat_guard.patterns import ToolFilter, compile_patterns


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

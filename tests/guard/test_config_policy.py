"""``progress`` and ``tools``: read from Python, a mapping, a file and the environment, and refused loudly."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from otel_repeat_guard import GuardConfig
from otel_repeat_guard.core.policy import CACHE_LIMIT, Policy, PolicyTable, ToolPolicy, resolve, with_result

TOOLS = {"poll_*": {"thresholds": [20, 10], "progress": "results"}, "write_*": {"stopAt": 6}}
READ = (
    ToolPolicy("poll_*", (10, 20), None, False, "results"),
    ToolPolicy("write_*", None, 6, True, None),
)


def test_the_defaults_are_the_seed_s() -> None:
    config = GuardConfig()
    assert config.progress == "none" and config.tools == ()


@pytest.mark.parametrize("spelling", ["results", " Results "])
def test_progress_is_read_in_any_case(spelling: str) -> None:
    assert GuardConfig(progress=spelling).progress == "results"
    assert GuardConfig.from_env({"OTEL_REPEAT_GUARD_PROGRESS": spelling}).progress == "results"


def test_tools_from_python_a_mapping_a_file_and_the_environment_agree(tmp_path: Path) -> None:
    yaml_file = tmp_path / "guard.yaml"
    yaml_file.write_text(
        "progress: none\ntools:\n  poll_*:\n    thresholds: [20, 10]\n    progress: results\n  write_*:\n    stopAt: 6\n"
    )
    toml_file = tmp_path / "guard.toml"
    toml_file.write_text(
        '[tools."poll_*"]\nthresholds = [10, 20]\nprogress = "results"\n[tools."write_*"]\nstop_at = 6\n'
    )
    built = [
        GuardConfig(tools=TOOLS),
        GuardConfig.from_mapping({"tools": TOOLS}),
        GuardConfig.from_file(yaml_file),
        GuardConfig.from_file(toml_file),
        GuardConfig.from_env({"OTEL_REPEAT_GUARD_TOOLS": json.dumps(TOOLS)}),
    ]
    assert [config.tools for config in built] == [READ] * 5
    again = dataclasses.replace(built[0], arguments_preview_chars=9)  # the entries read, read again
    assert again.tools == READ


def test_a_tool_policy_resolves_against_the_global_values() -> None:
    config = GuardConfig(thresholds=(3, 5, 8), tools=TOOLS)
    table = PolicyTable(config.tools, Policy(config.thresholds, config.stop_at, config.progress))
    assert table["poll_status"] == Policy((10, 20), None, "results")
    assert table["write_file"] == Policy((3, 5), 6, "none")  # the global 8 is past its stop
    assert table["read_file"] == Policy((3, 5, 8), None, "none")
    assert table["read_file"] is table["read_file"] and "read_file" in table.answers
    assert table.compares_results() and not PolicyTable((), Policy((3,), None, "none")).compares_results()


def test_the_tool_cache_starts_afresh_past_its_limit() -> None:
    table = PolicyTable((), Policy((3,), None, "none"))
    for n in range(CACHE_LIMIT + 1):
        table[f"tool_{n}"]
    assert list(table.answers) == [f"tool_{CACHE_LIMIT}"]


def test_a_stop_of_no_tool_and_a_global_stop() -> None:
    config = GuardConfig(thresholds=(3, 5), stop_at=9, tools={"poll_*": {"stop_at": None}, "x": {"progress": "none"}})
    assert resolve(config.tools[0], Policy(config.thresholds, config.stop_at, "results")) == Policy(
        (3, 5), None, "results"
    )
    assert resolve(config.tools[1], Policy(config.thresholds, config.stop_at, "results")) == Policy((3, 5), 9, "none")


def test_the_chain_key_of_a_result_holds_both() -> None:
    assert with_result(b"args", b"result") == b"argsresult"


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ({}, "tools must not be empty"),
        ([("poll_*", {})], "tools must map tool-name patterns to settings"),
        ({"": {"progress": "results"}}, "tools patterns must be non-empty strings, got ''"),
        ({"poll_*": {}}, "tools['poll_*'] must map some of thresholds, stop_at, progress"),
        ({"poll_*": [10]}, "tools['poll_*'] must map some of thresholds, stop_at, progress"),
        ({"poll_*": {"treshold": [10]}}, "tools['poll_*'] has an unknown key 'treshold' (did you mean 'thresholds'?)"),
        ({"poll_*": {7: 1}}, "tools['poll_*'] has an unknown key 7 (known keys: thresholds, stop_at, progress)"),
        ({"poll_*": {"stop_at": 9, "stopAt": 9}}, "tools['poll_*'] gives stop_at twice"),
        ({"poll_*": {"thresholds": [1]}}, "tools['poll_*'].thresholds must be at least 2"),
        ({"poll_*": {"thresholds": "10"}}, "tools['poll_*'].thresholds must be a sequence of integers"),
        ({"poll_*": {"progress": "sometimes"}}, "tools['poll_*'].progress must be one of none, results"),
        ({"poll_*": {"stop_at": "6"}}, "tools['poll_*'].stop_at must be an integer or None, got '6'"),
        ({"poll_*": {"stop_at": True}}, "tools['poll_*'].stop_at must be an integer or None, got True"),
        ({"poll_*": {"stop_at": 3}}, "tools['poll_*'].stop_at must be above the first threshold [3]"),
        ({"poll_*": {"stop_at": 200_000}}, "tools['poll_*'].stop_at must be above the first threshold [3] and at most"),
        (
            {"poll_*": {"thresholds": [4, 9], "stop_at": 9}},
            "tools['poll_*'].stop_at must be above its thresholds [4, 9]",
        ),
    ],
)
def test_a_bad_tools_value_names_tools_the_pattern_and_the_key(tools: Any, message: str) -> None:
    with pytest.raises(ValueError, match="^" + _literal(message)):
        GuardConfig(tools=tools)


def test_thresholds_past_the_global_stop_say_to_set_a_stop_of_their_own() -> None:
    with pytest.raises(
        ValueError, match=_literal("tools['poll_*'].thresholds must all be below the global stop_at 12")
    ):
        GuardConfig(stop_at=12, tools={"poll_*": {"thresholds": [10, 20]}})
    assert GuardConfig(stop_at=12, tools={"poll_*": {"thresholds": [10, 20], "stop_at": None}}).tools[0].sets_stop


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"OTEL_REPEAT_GUARD_TOOLS": "{poll"}, "OTEL_REPEAT_GUARD_TOOLS (tools) must be JSON, got '{poll'"),
        (
            {"OTEL_REPEAT_GUARD_TOOLS": '{"poll_*": {"stop": 6}}'},
            "OTEL_REPEAT_GUARD_TOOLS: tools['poll_*'] has an unknown key 'stop'",
        ),
        ({"OTEL_REPEAT_GUARD_TOOLS": "[]"}, "OTEL_REPEAT_GUARD_TOOLS: tools must map tool-name patterns"),
        (
            {"OTEL_REPEAT_GUARD_PROGRESS": "yes"},
            "OTEL_REPEAT_GUARD_PROGRESS: progress must be one of none, results, got 'yes'",
        ),
    ],
)
def test_the_environment_names_its_variable(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match="^" + _literal(message)):
        GuardConfig.from_env(environ)


def test_the_new_variables_are_known() -> None:
    from otel_repeat_guard.core.sources import KNOWN_VARIABLES

    assert {"OTEL_REPEAT_GUARD_PROGRESS", "OTEL_REPEAT_GUARD_TOOLS"} <= KNOWN_VARIABLES


def _literal(text: str) -> str:
    import re

    return re.escape(text)

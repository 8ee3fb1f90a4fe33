"""GuardConfig: normalization, and a loud ValueError naming the field for every bad value."""

from __future__ import annotations

import re
from typing import Any

import pytest

from otel_repeat_guard import GuardConfig


def test_defaults() -> None:
    config = GuardConfig()
    assert config.thresholds == (3, 5, 8)
    assert config.include == ()
    assert config.exclude == ("todo_write",)
    assert config.arguments_preview_chars == 500


def test_thresholds_are_normalized_to_an_ascending_tuple() -> None:
    assert GuardConfig(thresholds=[8, 3, 5]).thresholds == (3, 5, 8)  # type: ignore[arg-type]


def test_config_is_frozen() -> None:
    with pytest.raises(AttributeError):
        GuardConfig().thresholds = (4,)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "field", "shown"),
    [
        ({"thresholds": ()}, "thresholds", "()"),
        ({"thresholds": [3, "5"]}, "thresholds", "'5'"),
        ({"thresholds": [3, 4.0]}, "thresholds", "4.0"),
        ({"thresholds": [True, 3]}, "thresholds", "True"),
        ({"thresholds": [1, 3]}, "thresholds", "1"),
        ({"thresholds": [3, 3]}, "thresholds", "[3, 3]"),
        ({"thresholds": "3,5"}, "thresholds", "'3,5'"),
        ({"thresholds": 3}, "thresholds", "3"),
        ({"include": "grep"}, "include", "'grep'"),
        ({"exclude": "todo_write"}, "exclude", "'todo_write'"),
        ({"exclude": [""]}, "exclude", "''"),
        ({"include": [3]}, "include", "3"),
        ({"arguments_preview_chars": 0}, "arguments_preview_chars", "0"),
        ({"arguments_preview_chars": "500"}, "arguments_preview_chars", "'500'"),
        ({"arguments_preview_chars": True}, "arguments_preview_chars", "True"),
    ],
)
def test_invalid_values_raise_naming_field_and_value(kwargs: dict[str, Any], field: str, shown: str) -> None:
    with pytest.raises(ValueError, match=field) as raised:
        GuardConfig(**kwargs)
    assert shown in str(raised.value)


def test_a_pattern_matching_no_existing_tool_is_valid() -> None:
    assert GuardConfig(exclude=["mcp_*"]).exclude == ("mcp_*",)


def test_from_mapping_accepts_both_spellings() -> None:
    config = GuardConfig.from_mapping(
        {"thresholds": [4, 2], "include": ["grep*"], "exclude": [], "argumentsPreviewChars": 40}
    )
    assert config == GuardConfig(thresholds=(2, 4), include=("grep*",), exclude=(), arguments_preview_chars=40)
    assert GuardConfig.from_mapping({"arguments_preview_chars": 7}).arguments_preview_chars == 7


def test_from_mapping_rejects_unknown_keys_and_double_spellings() -> None:
    with pytest.raises(ValueError, match="unknown config key 'threshold'"):
        GuardConfig.from_mapping({"threshold": [3]})
    with pytest.raises(ValueError, match="arguments_preview_chars is given twice"):
        GuardConfig.from_mapping({"argumentsPreviewChars": 1, "arguments_preview_chars": 2})
    with pytest.raises(ValueError, match="config must be a mapping"):
        GuardConfig.from_mapping([("thresholds", [3])])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="thresholds"):
        GuardConfig.from_mapping({"thresholds": []})


def test_from_env_reads_every_variable() -> None:
    env = {
        "OTEL_REPEAT_GUARD_THRESHOLDS": " 4, 2 ,9",
        "OTEL_REPEAT_GUARD_INCLUDE": "grep*, read_file",
        "OTEL_REPEAT_GUARD_EXCLUDE": " - ",  # explicitly empty: exclude nothing
        "OTEL_REPEAT_GUARD_ARGUMENTS_PREVIEW_CHARS": " 64 ",
    }
    config = GuardConfig.from_env(env)
    assert config == GuardConfig(
        thresholds=(2, 4, 9), include=("grep*", "read_file"), exclude=(), arguments_preview_chars=64
    )


def test_from_env_defaults_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("THRESHOLDS", "INCLUDE", "EXCLUDE", "ARGUMENTS_PREVIEW_CHARS"):
        monkeypatch.delenv(f"OTEL_REPEAT_GUARD_{name}", raising=False)
    assert GuardConfig.from_env() == GuardConfig()
    monkeypatch.setenv("OTEL_REPEAT_GUARD_THRESHOLDS", "6")
    assert GuardConfig.from_env().thresholds == (6,)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"OTEL_REPEAT_GUARD_THRESHOLDS": "3,five"},
            "OTEL_REPEAT_GUARD_THRESHOLDS \\(thresholds\\) must be an integer, got 'five'",
        ),
        ({"OTEL_REPEAT_GUARD_THRESHOLDS": ""}, "thresholds must not be empty"),
        ({"OTEL_REPEAT_GUARD_THRESHOLDS": "1"}, "thresholds must be at least 2"),
        (
            {"OTEL_REPEAT_GUARD_ARGUMENTS_PREVIEW_CHARS": "lots"},
            "arguments_preview_chars\\) must be an integer, got 'lots'",
        ),
        (
            {"OTEL_REPEAT_GUARD_ARGUMENTS_PREVIEW_CHARS": "-1"},
            "arguments_preview_chars must be an integer >= 1, got -1",
        ),
    ],
)
def test_from_env_invalid_values_raise(env: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GuardConfig.from_env(env)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"OTEL_REPEAT_GUARD_THRESHOLDS": "3,,5"},
            r"OTEL_REPEAT_GUARD_THRESHOLDS \(thresholds\) has an empty item, got '3,,5'",
        ),
        ({"OTEL_REPEAT_GUARD_THRESHOLDS": "3,5,"}, "has an empty item"),
        (
            {"OTEL_REPEAT_GUARD_THRESHOLDS": "3,\u0665"},
            r"must be an integer, got '\u0665' in '3,\u0665' \(plain ASCII digits only\)",
        ),
        ({"OTEL_REPEAT_GUARD_THRESHOLDS": "1_000"}, "must be an integer, got '1_000'"),
        ({"OTEL_REPEAT_GUARD_THRESHOLDS": "3," + "1" + "0" * 23}, "thresholds must be at most 100,000"),
        ({"OTEL_REPEAT_GUARD_EXCLUDE": ""}, "OTEL_REPEAT_GUARD_EXCLUDE is set but empty: exclude must not be empty"),
        ({"OTEL_REPEAT_GUARD_INCLUDE": "grep,,ls"}, "OTEL_REPEAT_GUARD_INCLUDE \\(include\\) has an empty item"),
        ({"OTEL_REPEAT_GUARD_ARGUMENTS_PREVIEW_CHARS": "9" * 30}, "arguments_preview_chars must be at most 1,000,000"),
        (  # past int()'s own 4,300-digit limit, whose error names no variable
            {"OTEL_REPEAT_GUARD_THRESHOLDS": "9" * 5000},
            r"^OTEL_REPEAT_GUARD_THRESHOLDS \(thresholds\) is past every limit: a number of 5,000 digits$",
        ),
    ],
)
def test_from_env_refuses_what_it_used_to_bend(env: dict[str, str], message: str) -> None:
    """Lenient parsing the README never promised: empty items, non-ASCII digits, absurd values."""
    with pytest.raises(ValueError, match=message):
        GuardConfig.from_env(env)


def test_a_mapping_is_not_a_list_of_patterns() -> None:
    with pytest.raises(ValueError, match="exclude must be a sequence"):
        GuardConfig(exclude={"todo_write": True})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="thresholds must be a sequence"):
        GuardConfig.from_mapping({"thresholds": {3: 1}})


def test_every_variable_the_project_names_is_one_the_package_knows() -> None:
    """The oracle is the project itself: every OTEL_REPEAT_GUARD_* name in its code, docs, tests, make and compose
    files. A name missing from KNOWN_VARIABLES would be warned of as a typo."""
    import re
    from pathlib import Path

    from otel_repeat_guard.core.sources import KNOWN_VARIABLES

    root = Path(__file__).resolve().parents[2]
    files = [
        *(p for top in ("otel_repeat_guard", "docs", "tests", "benchmarks", "deploy") for p in (root / top).rglob("*")),
        *(root / name for name in ("README.md", "Makefile", "docker-compose.yml", "hatch_build.py")),
    ]
    named: set[str] = set()
    for path in files:
        if path.is_file() and path.suffix in {"", ".py", ".md", ".yml", ".yaml", ".txt", ".toml", ".sh", ".env"}:
            named.update(re.findall(r"OTEL_REPEAT_GUARD_[A-Z][A-Z_]*[A-Z]", path.read_text(errors="replace")))
    assert len(named) >= 25
    assert sorted(named - KNOWN_VARIABLES) == []


def test_a_misspelled_variable_is_warned_of_once_with_the_name_it_is_closest_to(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from otel_repeat_guard.core.sources import warn_unknown_variables

    misspelled = "OTEL_REPEAT_GUARD_" + "THRESHOLD"  # built, so the test above skips it
    env = {misspelled: "2", "OTEL_REPEAT_GUARD_EXCLUDE": "-"}
    assert GuardConfig.from_env(env).thresholds == (3, 5, 8)  # ignored, as before, but no longer unsaid
    assert [r.getMessage() for r in caplog.records] == [
        f"repeat guard: {misspelled} is not a variable it reads, so it is ignored "
        "(did you mean OTEL_REPEAT_GUARD_THRESHOLDS?)"
    ]
    assert warn_unknown_variables(env) == []  # once per name and process
    assert warn_unknown_variables({"OTEL_REPEAT_GUARD_" + "ZZZ": "1"}) == ["OTEL_REPEAT_GUARD_" + "ZZZ"]


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        (
            {"OTEL_REPEAT_GUARD_THRESHOLDS": 3},
            "OTEL_REPEAT_GUARD_THRESHOLDS must be a string, as environment variables are, got 3",
        ),
        ({"OTEL_REPEAT_GUARD_COLLAPSE_PARALLEL": True}, "OTEL_REPEAT_GUARD_COLLAPSE_PARALLEL must be a string"),
        ({"OTEL_REPEAT_GUARD_STORE": b"redis://h"}, "OTEL_REPEAT_GUARD_STORE must be a string"),
        ([("OTEL_REPEAT_GUARD_THRESHOLDS", "3")], "environ must be a mapping of variable names to strings, got list"),
    ],
    ids=["an-int", "a-bool", "bytes", "a-list-of-pairs"],
)
def test_from_env_names_a_variable_that_is_no_string(environ: object, message: str) -> None:
    """A mapping loaded from YAML or JSON holds 3, not "3": a ValueError naming the variable, not AttributeError."""
    with pytest.raises(ValueError, match=re.escape(message)):
        GuardConfig.from_env(environ)  # type: ignore[arg-type]


SAFE_URLS = {
    "http://u:Zq9SECRETpw@h:8123/otel": "http://***@h:8123/otel",
    "clickhouse:/u:Zq9SECRETpw@h": "clickhouse:/***@h",
    "u:Zq9SECRETpw@h:8123/otel": "***@h:8123/otel",
    "clickhouse:u:Zq9SECRETpw@h/otel": "***@h/otel",
    "https://u:Zq9SECRETpw@[::1/db": "https://***@[::1/db",
    "chdb://u:Zq9SECRETpw@/x": "chdb://***@/x",
    "clickhouse://u:Zq9/SE#CRETpw@h/otel": "clickhouse://***@h/otel",
    "clickhouse://u:Zq9SE?CRETpw@h/otel": "clickhouse://***@h/otel",
    "clickhouse://h/otel?table=t&password=Zq9SECRETpw&x=1": "clickhouse://h/otel?table=t&password=***&x=1",
    "CLICKHOUSE://h/otel?Access_Token=Zq9SECRETpw;api_key=Zq9SECRETpw": "CLICKHOUSE://h/otel?Access_Token=***;api_key=***",
    "clickhouse:\\\\u:Zq9SECRETpw@h/otel": "clickhouse:\\\\***@h/otel",
    "redis://h/0?client_name=me@host": "redis://h/0?client_name=me@host",
    "redis://host:6379/0": "redis://host:6379/0",
}


@pytest.mark.parametrize(("url", "shown"), list(SAFE_URLS.items()), ids=list(SAFE_URLS))
def test_a_url_is_quoted_without_user_password_or_secret_parameter_however_malformed(url: str, shown: str) -> None:
    from otel_repeat_guard.core.urls import safe_url

    assert safe_url(url) == shown
    assert "SECRET" not in safe_url(url) and "CRETpw" not in safe_url(url)


def test_every_setting_is_read_from_a_mapping_a_file_and_the_environment() -> None:
    import dataclasses

    from otel_repeat_guard.core.sources import FIELDS

    assert tuple(field.name for field in dataclasses.fields(GuardConfig)) == FIELDS

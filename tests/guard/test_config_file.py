"""Settings files: GuardConfig.from_file (TOML, YAML, JSON) and OTEL_REPEAT_GUARD_CONFIG_FILE, which from_env
(and so configure() and the zero-code setup) reads before the variables that override it.

Booleans read alike in a file, a mapping and the environment (one function, ``read_boolean``); an unknown key
gets the closest known one, as a misspelled variable does; every error is a ValueError naming the file.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from otel_repeat_guard import GuardConfig
from otel_repeat_guard.core.sources import CONFIG_FILE_ENV, MAX_CONFIG_FILE_BYTES, read_boolean

TOML = """\
thresholds = [2, 4]
exclude = ["think", "todo_write"]
collapse_parallel = true
stopAt = 6
"""
YAML = """\
thresholds: [2, 4]
exclude: [think, todo_write]
collapseParallel: yes
stop_at: 6
"""
JSON = '{"thresholds": [2, 4], "exclude": ["think", "todo_write"], "collapse_parallel": "on", "stop_at": 6}'
EXPECTED = GuardConfig(thresholds=(2, 4), exclude=("think", "todo_write"), collapse_parallel=True, stop_at=6)


def _file(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("name", "text"), [("guard.toml", TOML), ("guard.yaml", YAML), ("guard.YML", YAML), ("g.json", JSON)]
)
def test_a_toml_yaml_or_json_file_gives_the_config_its_mapping_would(tmp_path: Path, name: str, text: str) -> None:
    path = _file(tmp_path, name, text)
    assert GuardConfig.from_file(path) == EXPECTED
    assert GuardConfig.from_file(str(path)) == EXPECTED


def test_an_empty_yaml_file_is_the_defaults(tmp_path: Path) -> None:
    assert GuardConfig.from_file(_file(tmp_path, "empty.yaml", "# nothing set\n")) == GuardConfig()


def test_collapse_parallel_yes_reads_the_same_in_a_yaml_file_and_in_the_environment(tmp_path: Path) -> None:
    """Before: YAML's `yes` was accepted (PyYAML makes it True) and the environment's refused."""
    from_file = GuardConfig.from_file(_file(tmp_path, "g.yaml", "collapse_parallel: yes\nremote_runs: off\n"))
    from_env = GuardConfig.from_env(
        {"OTEL_REPEAT_GUARD_COLLAPSE_PARALLEL": "yes", "OTEL_REPEAT_GUARD_REMOTE_RUNS": "off"}
    )
    assert from_file == from_env == GuardConfig(collapse_parallel=True, remote_runs=False)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        *((word, True) for word in ("true", "True", "1", "yes", "YES", "on", " on ")),
        *((word, False) for word in ("false", "FALSE", "0", "no", "Off")),
        (True, True),
        (False, False),
        (1, True),
        (0, False),
    ],
)
def test_a_boolean_reads_alike_in_a_mapping_and_the_environment(value: object, expected: bool) -> None:
    assert read_boolean("collapse_parallel", value) is expected
    assert GuardConfig.from_mapping({"collapse_parallel": value}).collapse_parallel is expected
    if isinstance(value, str):
        env = {"OTEL_REPEAT_GUARD_COLLAPSE_PARALLEL": value}
        assert GuardConfig.from_env(env).collapse_parallel is expected


@pytest.mark.parametrize("value", ["maybe", "", "y", 2, -1, None, 1.0, [True]])
def test_anything_else_is_refused_alike_naming_the_field_and_the_value(value: object) -> None:
    rule = f"must be true or false (or 1/0, yes/no, on/off), got {value!r}"
    with pytest.raises(ValueError) as raised:
        GuardConfig.from_mapping({"collapseParallel": value})
    assert str(raised.value) == f"collapse_parallel {rule}"
    if isinstance(value, str):
        with pytest.raises(ValueError) as raised:
            GuardConfig.from_env({"OTEL_REPEAT_GUARD_COLLAPSE_PARALLEL": value})
        assert str(raised.value) == f"OTEL_REPEAT_GUARD_COLLAPSE_PARALLEL (collapse_parallel) {rule}"


def test_remote_runs_may_be_left_to_its_default_in_a_file(tmp_path: Path) -> None:
    config = GuardConfig.from_file(_file(tmp_path, "g.yaml", "remoteRuns: null\nchain_store: redis://h:6379/0\n"))
    assert config.remote_runs is None and config.follows_remote_runs is True


def test_an_unknown_key_names_the_file_and_the_closest_known_key(tmp_path: Path) -> None:
    path = _file(tmp_path, "g.toml", "tresholds = [2, 4]\n")
    with pytest.raises(ValueError) as raised:
        GuardConfig.from_file(path)
    assert (
        str(raised.value) == f"config file {str(path)!r}: unknown config key 'tresholds' (did you mean 'thresholds'?)"
    )
    with pytest.raises(ValueError) as raised:
        GuardConfig.from_mapping({"collapseParalel": True})
    assert str(raised.value) == "unknown config key 'collapseParalel' (did you mean 'collapseParallel'?)"


@pytest.mark.parametrize(("key", "shown"), [("zzz: 1", "'zzz'"), ("3: 1", "3")])
def test_a_key_like_none_known_lists_the_known_keys(tmp_path: Path, key: str, shown: str) -> None:
    with pytest.raises(ValueError) as raised:
        GuardConfig.from_file(_file(tmp_path, "g.yaml", key + "\n"))
    assert f"unknown config key {shown} (known keys: thresholds, include, exclude," in str(raised.value)


def test_a_bad_value_in_a_file_names_the_file_and_the_field(tmp_path: Path) -> None:
    path = _file(tmp_path, "g.json", '{"thresholds": [3, 3]}')
    with pytest.raises(ValueError) as raised:
        GuardConfig.from_file(path)
    assert str(raised.value) == f"config file {str(path)!r}: thresholds must not repeat a value, got [3, 3]"


@pytest.mark.parametrize(
    ("name", "content", "problem"),
    [
        ("g.toml", "thresholds = [2,\n", "not valid TOML: "),
        ("g.yaml", "thresholds: [2, 4\n", "not valid YAML: while parsing a flow sequence"),
        ("g.json", "{", "not valid JSON: Expecting property name enclosed in double quotes"),
        ("g.yaml", "- 2\n- 4\n", "config must be a mapping, got [2, 4]"),
        ("g.toml", b"thresholds = [2]\xff\n", "'utf-8' codec can't decode byte 0xff"),
        ("g.ini", "thresholds = 2\n", "the name must end in .toml, .yaml, .yml, .json, got '.ini'"),
        ("g.yaml", "x" * (MAX_CONFIG_FILE_BYTES + 1), "over 1,000,000 bytes, which no settings file needs"),
    ],
)
def test_a_file_that_is_no_settings_mapping_is_one_clear_error_naming_it(
    tmp_path: Path, name: str, content: str | bytes, problem: str
) -> None:
    path = _file(tmp_path, name, content)
    with pytest.raises(ValueError) as raised:
        GuardConfig.from_file(path)
    assert str(raised.value).startswith(f"config file {str(path)!r}: {problem}")
    assert "\n" not in str(raised.value)


def test_a_missing_file_a_folder_and_an_unreadable_path_are_refused_without_waiting(tmp_path: Path) -> None:
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)  # opening it to read would wait for a writer for ever
    long_name = tmp_path / ("x" * 300 + ".toml")  # the system refuses the name itself
    cases = {
        tmp_path / "missing.toml": "no such file",
        folder: "not a regular file",
        fifo: "not a regular file",
        long_name: "cannot read it (File name too long)",
    }
    for path, problem in cases.items():
        with pytest.raises(ValueError) as raised:
            GuardConfig.from_file(path)
        assert str(raised.value) == f"config file {str(path)!r}: {problem}"


def test_a_yaml_file_without_pyyaml_names_the_extra_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "yaml", None)  # as if PyYAML were not installed: its import fails
    path = _file(tmp_path, "g.yaml", YAML)
    with pytest.raises(ValueError) as raised:
        GuardConfig.from_file(path)
    assert str(raised.value) == (
        f"config file {str(path)!r}: reading YAML needs PyYAML: pip install 'otel-repeat-guard[yaml]'"
    )
    assert GuardConfig.from_file(_file(tmp_path, "g.toml", TOML)) == EXPECTED  # TOML needs nothing more


def test_toml_without_a_reader_names_the_package_python_3_10_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tomllib", None)
    monkeypatch.setitem(sys.modules, "tomli", None)
    path = _file(tmp_path, "g.toml", TOML)
    with pytest.raises(ValueError) as raised:
        GuardConfig.from_file(path)
    assert str(raised.value) == (
        f"config file {str(path)!r}: reading TOML on Python 3.10 needs the tomli package: pip install tomli"
    )


def test_the_environment_reads_the_file_first_and_its_variables_override_it(tmp_path: Path) -> None:
    path = _file(tmp_path, "g.toml", TOML)
    assert GuardConfig.from_env({CONFIG_FILE_ENV: str(path)}) == EXPECTED
    env = {CONFIG_FILE_ENV: f" {path} ", "OTEL_REPEAT_GUARD_EXCLUDE": "-", "OTEL_REPEAT_GUARD_STOP_AT": "9"}
    config = GuardConfig.from_env(env)
    assert (config.thresholds, config.exclude, config.collapse_parallel, config.stop_at) == ((2, 4), (), True, 9)


@pytest.mark.parametrize(
    ("file_text", "variables", "error"),
    [
        ("stop_at = 6", {"OTEL_REPEAT_GUARD_THRESHOLDS": "3,8"}, "{file}: stop_at must be an integer above every"),
        ("thresholds = [3, 8]", {"OTEL_REPEAT_GUARD_STOP_AT": "4"}, "OTEL_REPEAT_GUARD_STOP_AT: stop_at must be"),
        ("thresholds = [3, 3]", {}, "{file}: thresholds must not repeat a value, got [3, 3]"),
        ("treshold = 3", {}, "OTEL_REPEAT_GUARD_CONFIG_FILE: {file}: unknown config key 'treshold' (did you mean"),
    ],
)
def test_an_error_names_the_variable_or_the_file_its_value_came_from(
    tmp_path: Path, file_text: str, variables: dict[str, str], error: str
) -> None:
    path = _file(tmp_path, "g.toml", file_text + "\n")
    with pytest.raises(ValueError) as raised:
        GuardConfig.from_env({CONFIG_FILE_ENV: str(path), **variables})
    assert str(raised.value).startswith(error.format(file=f"config file {str(path)!r}"))


def test_a_config_file_variable_set_but_empty_or_naming_nothing_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as raised:
        GuardConfig.from_env({CONFIG_FILE_ENV: " "})
    assert str(raised.value) == (
        "OTEL_REPEAT_GUARD_CONFIG_FILE is set but empty: unset it, or name a .toml, .yaml or .json file"
    )
    missing = tmp_path / "nowhere.yaml"
    with pytest.raises(ValueError) as raised:
        GuardConfig.from_env({CONFIG_FILE_ENV: str(missing)})
    assert str(raised.value) == f"OTEL_REPEAT_GUARD_CONFIG_FILE: config file {str(missing)!r}: no such file"


def test_configure_reads_the_config_file_the_environment_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from otel_repeat_guard import configure

    monkeypatch.setenv(CONFIG_FILE_ENV, str(_file(tmp_path, "g.yaml", YAML)))
    telemetry = configure(span_exporters=[], metric_readers=[], set_global=False)
    try:
        assert telemetry.guard.config == EXPECTED
    finally:
        telemetry.tracer_provider.shutdown()
        telemetry.meter_provider.shutdown()
    given = GuardConfig(thresholds=(7,))  # a config given in Python: neither the file nor the variables count
    telemetry = configure(given, span_exporters=[], metric_readers=[], set_global=False)
    try:
        assert telemetry.guard.config is given
    finally:
        telemetry.tracer_provider.shutdown()
        telemetry.meter_provider.shutdown()

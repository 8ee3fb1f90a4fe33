"""The console scripts' entry (``otel_repeat_guard_entry``): the package registered without its ``__init__``, the SDK's
span limits refused in one line before the SDK is imported (issue 41, item 5), the command hook's fast path kept
free of OpenTelemetry (issue 40, item 5)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import SpanLimits

from otel_repeat_guard.cli.sdk_limits import SDK_LIMITS, sdk_limit_problem

BIN = Path(sys.executable).parent
VALUES = ("-5", "abc", "", "  7 ", "0", "1.5", "-0", "1_000", "+3", " ", "unset", "9" * 30)


@pytest.mark.parametrize("value", VALUES)
def test_the_limits_refused_are_the_ones_the_sdk_refuses(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SDK_LIMITS:
        monkeypatch.setenv(name, value)
        try:
            SpanLimits._from_env_if_absent(None, name)  # the SDK's own reading, at its import and in SpanLimits()
            refused = False
        except ValueError:
            refused = True
        problem = sdk_limit_problem({name: value})
        assert (problem is not None) == refused, (name, value, problem)
        if problem is not None:
            assert problem.startswith(f"{name}={value!r} ") and "\n" not in problem
        monkeypatch.delenv(name)


def run(command: list[str], env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        input=stdin,
        env={"PATH": f"{BIN}:/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    "command",
    [
        ["otel-repeat-guard", "--version"],
        ["otel-repeat-guard", "doctor", "--store", "nowhere.db"],
        ["otel-repeat-guard", "rollup", "--store", "nowhere.db"],
        ["otel-repeat-guard", "ingest", "--help"],
    ],
)
@pytest.mark.parametrize("limit", ["OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"])
def test_every_command_refuses_a_bad_span_limit_in_one_line_naming_it(
    command: list[str], limit: str, tmp_path: Path
) -> None:
    done = run(command, {limit: "-5"})
    assert done.returncode == 2, done.stderr
    assert (
        done.stderr
        == f"otel-repeat-guard: {limit}='-5' is not a span limit: a whole number of 0 or more, or empty for none\n"
    )
    assert done.stdout == ""


def test_the_command_hook_says_a_bad_span_limit_in_one_line_and_lets_claude_go_on(tmp_path: Path) -> None:
    event = json.dumps({"session_id": "s", "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": {}})
    env = {"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "-5", "OTEL_REPEAT_GUARD_DB": str(tmp_path / "store.db")}
    for command in (["otel-repeat-guard-claude-code-hook"], ["otel-repeat-guard", "claude-code-hook"]):
        with_spans = run(command, {**env, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}, event)
        assert with_spans.returncode == 0 and with_spans.stdout == ""
        assert with_spans.stderr.count("\n") == 1 and "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT='-5'" in with_spans.stderr
        fast = run(command, env, event)  # no span, no SDK: the limit does not matter, the call counts
        assert (fast.returncode, fast.stderr) == (0, "")


def test_a_good_limit_and_an_empty_one_pass(tmp_path: Path) -> None:
    done = run(
        ["otel-repeat-guard", "--version"], {"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "", "OTEL_SPAN_EVENT_COUNT_LIMIT": "7"}
    )
    assert done.returncode == 0 and done.stdout.startswith("otel-repeat-guard "), done.stderr


def test_the_entry_leaves_an_imported_package_alone_and_completes_a_deferred_one(tmp_path: Path) -> None:
    code = (
        "import sys, otel_repeat_guard_entry as e\n"
        "e._package_without_init()\n"
        "import otel_repeat_guard as p\n"
        "assert not hasattr(p, '__version__'), 'the __init__ ran'\n"
        "import otel_repeat_guard.core.canonical\n"
        "from otel_repeat_guard.cli.claude_code_hook import whole_package\n"
        "whole_package()\n"
        "assert p is sys.modules['otel_repeat_guard'] and p.__version__ and p.RepeatGuardSpanProcessor\n"
        'assert p.core.canonical.canonical_arguments(\'{"b":1,"a":2}\') == \'{"a":2,"b":1}\'\n'
        "whole_package()  # once only\n"
        "e._package_without_init()  # registered already: left as it is\n"
        "assert sys.modules['otel_repeat_guard'] is p\n"
    )
    run_code(code, tmp_path)


def run_code(code: str, folder: Path) -> str:
    """``code`` in a new interpreter, in ``folder`` (on the compiled build, the installed package is the one to
    import); its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False, cwd=folder
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_with_inspect_deferred_a_dataclass_without_a_docstring_still_gets_its_signature_as_its_doc(
    tmp_path: Path,
) -> None:
    code = (
        "import sys, otel_repeat_guard_entry as e\n"
        "e.defer_inspect()\n"
        "import dataclasses\n"
        "stand_in = sys.modules['inspect']\n"
        "print('ast' in sys.modules, type(stand_in).__name__, sorted(vars(stand_in)))\n"
        "@dataclasses.dataclass(frozen=True)\n"
        "class Point:\n"
        "    x: int\n"
        "    y: str = 'a'\n"
        "print(Point.__doc__)\n"
        "import inspect\n"
        "from inspect import signature\n"
        "print(inspect is sys.modules['inspect'] is not stand_in, inspect.__file__.endswith('inspect.py'))\n"
        "print(signature is inspect.signature is stand_in.signature, stand_in.getmembers is inspect.getmembers)\n"
        "e.defer_inspect()  # imported already: left as it is\n"
        "print(sys.modules['inspect'] is inspect)\n"
    )
    lines = run_code(code, tmp_path).splitlines()
    assert lines == [
        "False module ['__doc__', '__getattr__', '__loader__', '__name__', '__package__', '__spec__']",
        "Point(x: int, y: str = 'a')",
        "True True",
        "True True",
        "True",
    ]


def test_with_inspect_deferred_a_from_import_gets_the_real_name_and_a_real_module_is_never_removed(
    tmp_path: Path,
) -> None:
    first = (
        "import sys, otel_repeat_guard_entry as e\n"
        "e.defer_inspect()\n"
        "from inspect import signature\n"
        "print(signature(divmod), sys.modules['inspect'].signature is signature)\n"
    )
    assert run_code(first, tmp_path).splitlines() == ["(x, y, /) True"]
    loaded_meanwhile = (  # the real module loaded past the stand-in: the stand-in hands reads to it, and keeps it
        "import importlib, sys, otel_repeat_guard_entry as e\n"
        "e.defer_inspect()\n"
        "stand_in = sys.modules.pop('inspect')\n"
        "real = importlib.import_module('inspect')\n"
        "print(stand_in.signature is real.signature, sys.modules['inspect'] is real)\n"
    )
    assert run_code(loaded_meanwhile, tmp_path).splitlines() == ["True True"]

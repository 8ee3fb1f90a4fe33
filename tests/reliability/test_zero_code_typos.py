"""Zero-code setup never stops the program: a typo in an ``OTEL_REPEAT_GUARD_*`` variable under a real
``opentelemetry-instrument``.

The bad value is one error line naming the variable and the value, no guard is installed, and the
framework adapters the agent builds without ``guard=`` (as the docs allow) pass every call through
unguarded, with one warning naming that same reason. The subprocess imports the build this test
runs on (the checkout for ``make unit``, the installed wheel for ``make unit-compiled``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import otel_repeat_guard

INSTRUMENT = Path(sys.executable).parent / "opentelemetry-instrument"
PACKAGE_ROOT = Path(otel_repeat_guard.__file__).resolve().parents[1]
"""Where this test imported the package from: the subprocess imports the same one."""

AGENT = """
import asyncio, json
from opentelemetry import trace
import otel_repeat_guard
from otel_repeat_guard.integrations import take_reminders
from otel_repeat_guard.integrations.crewai import repeat_guard_llm_hook
from otel_repeat_guard.integrations.haystack import RepeatGuardHook

class State:  # what a Haystack hook is handed
    def __init__(self): self.set_calls = []
    def set(self, key, value): self.set_calls.append(key)

class Context:  # what a CrewAI hook is handed
    def __init__(self): self.messages = [{"role": "user", "content": "hi"}]

hook, llm_hook = RepeatGuardHook(), repeat_guard_llm_hook()  # no guard=: the process-wide one, if any
state, context = State(), Context()
tracer = trace.get_tracer("agent")
run = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "looper"}
with tracer.start_as_current_span("invoke_agent looper", attributes=run):
    for _ in range(6):
        tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "grep", "gen_ai.tool.call.arguments": "{}"}
        tracer.start_span("execute_tool grep", attributes=tool).end()
        hook.run(state)
        asyncio.run(hook.run_async(state))
        llm_hook(context)
print(json.dumps({
    "build": otel_repeat_guard.build_mode(),
    "installed": otel_repeat_guard.installed_guard() is not None,
    "thresholds": getattr(getattr(otel_repeat_guard.installed_guard(), "config", None), "thresholds", None),
    "state": state.set_calls,
    "messages": len(context.messages),
    "package": otel_repeat_guard.__file__,
}))
"""


@pytest.mark.parametrize(
    ("variables", "error"),
    [
        (
            {"OTEL_REPEAT_GUARD_ENABLED": "true", "OTEL_REPEAT_GUARD_THRESHOLDS": "3,5,x"},
            "OTEL_REPEAT_GUARD_THRESHOLDS (thresholds) must be an integer, got 'x' in '3,5,x' (plain ASCII digits only)",
        ),
        (
            {"OTEL_REPEAT_GUARD_ENABLED": "ture"},
            "OTEL_REPEAT_GUARD_ENABLED must be true or false (or 1/0, yes/no, on/off), got 'ture'",
        ),
        (
            {"OTEL_REPEAT_GUARD_ENABLED": "1", "OTEL_REPEAT_GUARD_STORE": "redis://:99999"},
            "OTEL_REPEAT_GUARD_STORE: chain_store is not a valid Redis URL (Port out of range 0-65535), "
            "got 'redis://:99999'",
        ),
    ],
    ids=["thresholds", "enabled", "store"],
)
def test_a_typo_in_the_environment_is_one_line_and_every_adapter_passes_calls_through(
    tmp_path: Path, variables: dict[str, str], error: str
) -> None:
    result, lines = _instrumented(tmp_path, variables)
    assert result == {**result, "installed": False, "state": [], "messages": 1}  # every call passed through
    assert lines == [
        f"repeat guard not installed, the program runs unguarded: {error}",
        "framework adapters built now pass every model call through unguarded: "
        f"the repeat guard was not installed ({error})",
    ]


def test_a_misspelled_variable_name_is_named_with_the_one_it_is_closest_to(tmp_path: Path) -> None:
    misspelled = "OTEL_REPEAT_GUARD_" + "ENABLE"  # built, so the test of every name the project uses skips it
    result, lines = _instrumented(tmp_path, {misspelled: "true"})
    assert result == {**result, "installed": False, "state": [], "messages": 1}
    assert lines[0] == (
        f"repeat guard: {misspelled} is not a variable it reads, so it is ignored "
        "(did you mean OTEL_REPEAT_GUARD_ENABLED?)"
    )
    assert lines[1].startswith("framework adapters built now pass every model call through unguarded: no repeat")
    assert len(lines) == 2


def test_a_typo_in_the_config_file_is_one_line_naming_the_file_and_the_key_it_is_closest_to(tmp_path: Path) -> None:
    settings = tmp_path / "guard.yaml"
    settings.write_text("thresholds: [2, 4]\ncollapse_paralel: yes\n", encoding="utf-8")
    variables = {"OTEL_REPEAT_GUARD_ENABLED": "yes", "OTEL_REPEAT_GUARD_CONFIG_FILE": str(settings)}
    result, lines = _instrumented(tmp_path, variables)
    assert result == {**result, "installed": False, "state": [], "messages": 1}
    error = (
        f"OTEL_REPEAT_GUARD_CONFIG_FILE: config file {str(settings)!r}: "
        "unknown config key 'collapse_paralel' (did you mean 'collapse_parallel'?)"
    )
    assert lines[0] == f"repeat guard not installed, the program runs unguarded: {error}"
    assert len(lines) == 2


def test_the_zero_code_setup_reads_the_config_file(tmp_path: Path) -> None:
    settings = tmp_path / "guard.toml"
    settings.write_text("thresholds = [2, 4]\nexclude = []\n", encoding="utf-8")
    variables = {"OTEL_REPEAT_GUARD_ENABLED": "on", "OTEL_REPEAT_GUARD_CONFIG_FILE": str(settings)}
    result, lines = _instrumented(tmp_path, variables)
    assert result["installed"] is True
    assert result["thresholds"] == [2, 4]
    assert not [line for line in lines if "not installed" in line or "CONFIG_FILE" in line]


def test_with_the_sdk_disabled_the_guard_says_it_sees_nothing_instead_of_installing(tmp_path: Path) -> None:
    result, lines = _instrumented(tmp_path, {"OTEL_REPEAT_GUARD_ENABLED": "true", "OTEL_SDK_DISABLED": "true"})
    assert result == {**result, "installed": False, "state": [], "messages": 1}
    reason = "OTEL_REPEAT_GUARD_ENABLED is set but OTEL_SDK_DISABLED is true, so the SDK makes no spans"
    assert lines == [
        f"{reason}: no spans to watch, guard not installed",
        f"framework adapters built now pass every model call through unguarded: the repeat guard was not installed ({reason})",
    ]


def _instrumented(tmp_path: Path, variables: dict[str, str]) -> tuple[dict[str, object], list[str]]:
    """The agent run under ``opentelemetry-instrument`` with ``variables``: what it printed, and its stderr's lines."""
    assert INSTRUMENT.exists(), "opentelemetry-instrument is part of the test dependencies"
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTHONPATH"))}
    env.update(
        PYTHONPATH=str(PACKAGE_ROOT),
        OTEL_TRACES_EXPORTER="none",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        **variables,
    )
    done = subprocess.run(
        [str(INSTRUMENT), sys.executable, str(script)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["build"] == otel_repeat_guard.build_mode()
    assert Path(result["package"]).resolve() == Path(otel_repeat_guard.__file__).resolve()
    return result, [line for line in done.stderr.splitlines() if line.strip()]

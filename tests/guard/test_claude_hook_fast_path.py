"""The Claude Code command hook's fast path (no spans, no OpenTelemetry) against its span path (the guard on an
``execute_tool`` span per call, exported to the store): the same answers, store rows and chains, event for event
(issue 40, item 5: one tool path, the guard's rules shared)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from otel_repeat_guard.cli import claude_code_hook
from otel_repeat_guard.decide.blind_spots import NO_ARGUMENTS
from otel_repeat_guard.integrations import _claude_rows

SESSION = "0f1e2d3c-4b5a-4968-8776-655443322110"


def post(call_id: str, tool: str = "Bash", value: Any = None, **more: Any) -> dict[str, Any]:
    event = {
        "session_id": SESSION,
        "hook_event_name": "PostToolUse",
        "tool_name": tool,
        "tool_input": {"command": "ls -la"} if value is None else value,
        "tool_response": {"stdout": "total 0"},
        "tool_use_id": call_id,
        "duration_ms": 7,
    }
    return {**event, **more}


def pre(call_id: str, tool: str = "Bash", value: Any = None, **more: Any) -> dict[str, Any]:
    event = post(call_id, tool, value, hook_event_name="PreToolUse", **more)
    del event["tool_response"], event["duration_ms"]
    return event


def turn(event: str, **more: Any) -> dict[str, Any]:
    return {"session_id": SESSION, "hook_event_name": event, **more}


LONG = {"path": "x" * 3_000, "note": "é\U0001f600"}
EVENTS: list[dict[str, Any]] = [
    *(post(f"a{i}") for i in range(9)),  # reminders at 3, 5 and 8
    post("b0", "Read", {"file_path": "/etc/hosts"}),  # breaks the run: the waiting reminder's outcome settled
    post("b1", "Read", {"file_path": "/etc/hosts"}),
    post("b2", "Read", {"file_path": "/etc/hosts"}, hook_event_name="PostToolUseFailure", error="boom"),
    {**post("b3", "Read"), "hook_event_name": "PermissionDenied", "reason": "not allowed"},
    {k: v for k, v in post("c0", "Glob").items() if k != "tool_input"},  # no arguments: uncompared, breaks the run
    {k: v for k, v in post("c1", "Glob").items() if k != "tool_input"},
    post("d0", "Write", []),
    post("d1", "Write", ""),
    post("d2", "Write", {}),
    post("d3", "Write", {}),
    post("e0", "TodoWrite", {"todos": []}),  # excluded by default: never counted
    *(post(f"f{i}", "Grep", LONG) for i in range(3)),  # a long preview, cut; a character past the BMP
    post("g0", "Grep", {"pattern": "\ud83d"}),  # a lone surrogate, as Node writes output cut inside a character
    *(post(f"i{i}", "Read", {"offset": 2**70, "limit": 1e19, "x": -0.0}) for i in range(2)),  # numbers past 64 bits
    *(post(f"j{i}", "Read", {"offset": 1.5e300}, tool_response="\ud83d") for i in range(2)),  # read by the stdlib
    *(post(f"s{i}", "Bash", agent_id="ab12", agent_type="Explore") for i in range(3)),  # a subagent's own chain
    turn("SubagentStop", agent_id="ab12"),
    pre("p0"),
    pre("p1"),
    post("p1"),  # p0 still open: p1 waits for it (no transcript), then counts later
    turn("Stop"),  # the turn is over: p0 counts as denied, then p1
    turn("UserPromptSubmit"),  # a new prompt: the chain starts afresh
    *(post(f"h{i}") for i in range(3)),
    {**post("n0"), "session_id": "not-a-uuid"},
    turn("SessionEnd"),
]


def run_events(
    events: Sequence[Mapping[str, Any]], folder: Path, environ: Mapping[str, str], *, spans: bool
) -> list[dict[str, Any]]:
    """Each event through the hook's ``handle``, as its own process would, on the span path or the fast one."""
    env = {"OTEL_REPEAT_GUARD_DB": str(folder / "store.db"), **environ}
    answers = []
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():  # a hook process's environment is its os.environ, which the SDK reads
            patch.setenv(name, value)
        if spans:  # the path's choice only: every part it then takes is the real one
            patch.setattr(claude_code_hook, "needs_spans", lambda config, environ: True)
        for event in events:
            answers.append(claude_code_hook.handle(event, env))
    return answers


def table(path: Path, query: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        return sorted(conn.execute(query).fetchall(), key=repr)


STORE_QUERIES = (
    # every column but the row id, the times (each path's own clock) and the span id (random on both)
    "SELECT duration_ns, service_name, CASE WHEN trace_id LIKE '0f1e%' THEN trace_id ELSE length(trace_id) END,"
    " parent_span_id, agent_key, agent_name, agent_known, agent_pending, tool_name, tracked, arguments_digest, error,"
    " run_length, reminder_tier, reminder_threshold, unguarded_reason FROM tool_calls",
    "SELECT c.tool_name, c.run_length, d.kind, d.run_length, d.period, d.repetitions, d.cycle_tools,"
    " d.outcome_digest, d.reminder_tier, d.reminder_threshold FROM detections d JOIN tool_calls c ON c.id = d.call_id",
    "SELECT c.tool_name, c.run_length, a.preview FROM tool_call_arguments a JOIN tool_calls c ON c.id = a.call_id",
    "SELECT kind, value FROM dimensions",
    "SELECT service_name, agent, tool_name, tracked, calls, repeated_calls, gentle_reminders, detailed_reminders,"
    " longest_run, repeated_ns FROM call_rollup",
    "SELECT key, value FROM store_info WHERE key != 'created_at'",
)
CHAIN_QUERIES = (
    "SELECT chain_key, tool, arguments_key, run, waiting FROM claude_code_chains",
    "SELECT call_id, chain_key FROM claude_code_open_calls",
    "SELECT call_id FROM claude_code_denied_calls",
)


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"OTEL_REPEAT_GUARD_THRESHOLDS": "2,4", "OTEL_REPEAT_GUARD_STOP_AT": "6", "OTEL_SERVICE_NAME": "my-claude"},
        {"OTEL_REPEAT_GUARD_INCLUDE": "Bash,Read", "OTEL_REPEAT_GUARD_ARGUMENTS_PREVIEW_CHARS": "40"},
        {"OTEL_RESOURCE_ATTRIBUTES": "team=a,service.name=claude%20hooks", "OTEL_REPEAT_GUARD_EXCLUDE": "Glob"},
    ],
    ids=["defaults", "thresholds-stop-service", "include-preview", "resource-exclude"],
)
def test_the_fast_path_answers_and_stores_every_event_as_the_span_path_does(
    tmp_path: Path, environ: dict[str, str]
) -> None:
    (tmp_path / "spans").mkdir()
    (tmp_path / "fast").mkdir()
    by_spans = run_events(EVENTS, tmp_path / "spans", environ, spans=True)
    fast = run_events(EVENTS, tmp_path / "fast", environ, spans=False)
    assert fast == by_spans
    assert sum(bool(answer) for answer in fast) >= 3  # reminders were due, and said
    for query in STORE_QUERIES:
        assert table(tmp_path / "fast" / "store.db", query) == table(tmp_path / "spans" / "store.db", query), query
    for query in CHAIN_QUERIES:
        assert table(tmp_path / "fast" / "store.chains.db", query) == table(
            tmp_path / "spans" / "store.chains.db", query
        ), query
    excluded = environ.get("OTEL_REPEAT_GUARD_EXCLUDE", "TodoWrite")
    counted = [e for e in EVENTS if e.get("tool_name") not in (None, excluded) and e["hook_event_name"] != "PreToolUse"]
    assert len(table(tmp_path / "fast" / "store.db", "SELECT id FROM tool_calls")) == len(counted) + 1  # p0, at Stop


def test_the_chain_handed_over_mid_run_continues_on_the_other_path(tmp_path: Path) -> None:
    answers = run_events([post(f"a{i}") for i in range(4)], tmp_path, {}, spans=True)
    answers += run_events([post(f"a{i}") for i in range(4, 8)], tmp_path, {}, spans=False)
    assert [bool(answer) for answer in answers] == [False, False, True, False, True, False, False, True]
    runs = table(tmp_path / "store.db", "SELECT run_length FROM tool_calls")
    assert runs == [(i,) for i in range(1, 9)]


def test_the_no_arguments_reason_is_the_guards(tmp_path: Path) -> None:
    assert NO_ARGUMENTS == _claude_rows.NO_ARGUMENTS


def test_only_spans_to_export_a_shared_store_or_opt_in_detectors_take_the_span_path() -> None:
    config = claude_code_hook.hook_config({})
    assert not _claude_rows.needs_spans(config, {})
    assert _claude_rows.needs_spans(config, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert _claude_rows.needs_spans(claude_code_hook.hook_config({"OTEL_REPEAT_GUARD_STORE": "redis://h:6379"}), {})
    for opt_in in ("CYCLE_THRESHOLDS", "NO_PROGRESS_THRESHOLDS"):
        assert _claude_rows.needs_spans(claude_code_hook.hook_config({f"OTEL_REPEAT_GUARD_{opt_in}": "3"}), {})
    assert _claude_rows.needs_spans(claude_code_hook.hook_config({"OTEL_REPEAT_GUARD_COLLAPSE_PARALLEL": "true"}), {})


def test_a_policy_per_tool_progress_or_another_wording_takes_the_span_path_where_the_guard_decides_them() -> None:
    for name, value in (
        ("TOOLS", '{"Bash": {"thresholds": [2]}}'),
        ("PROGRESS", "results"),
        ("REMINDER_STYLE", "redirect"),
        ("REMINDER_VARIANTS", "seed,redirect"),
    ):
        assert _claude_rows.needs_spans(claude_code_hook.hook_config({f"OTEL_REPEAT_GUARD_{name}": value}), {}), name


def test_the_hook_reminds_at_a_tools_own_threshold(tmp_path: Path) -> None:
    tools = {"OTEL_REPEAT_GUARD_TOOLS": '{"Bash": {"thresholds": [2, 4]}}'}
    answers = run_events([post(f"a{i}") for i in range(4)], tmp_path, tools, spans=False)
    assert [bool(answer) for answer in answers] == [False, True, False, True]
    answers = run_events([post(f"b{i}", tool="Read") for i in range(3)], tmp_path, tools, spans=False)
    assert [bool(answer) for answer in answers] == [False, False, True]  # the other tools: the global 3, 5, 8


def imported_modules(event: Mapping[str, Any], folder: Path, **env: str) -> list[str]:
    """The modules one hook call of the console script's entry imports (``python -X importtime``)."""
    code = "import otel_repeat_guard_entry, sys; sys.exit(otel_repeat_guard_entry.claude_code_hook([]))"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        input=json.dumps(event).encode(),
        env={"PATH": "/usr/bin:/bin", "OTEL_REPEAT_GUARD_DB": str(folder / "store.db"), **env},
        capture_output=True,
        timeout=60,
        check=True,
        cwd=folder,  # not the checkout: on the compiled build, the installed package is the one to import
    )
    lines = done.stderr.decode().splitlines()
    return [line.split("|")[-1].strip() for line in lines if line.startswith("import time:")]


def test_a_hook_call_on_the_fast_path_imports_no_opentelemetry_and_runs_no_package_init(tmp_path: Path) -> None:
    for event in (post("a0"), post("a1"), pre("p0"), turn("Stop"), turn("SessionEnd")):
        modules = imported_modules(event, tmp_path)
        assert "otel_repeat_guard.core.chains" in modules or event["hook_event_name"] != "PostToolUse"
        assert [m for m in modules if m.startswith("opentelemetry")] == []
        assert "otel_repeat_guard.processor" not in modules
    assert table(tmp_path / "store.db", "SELECT run_length FROM tool_calls") == [(1,), (2,), (3,)]  # p0, at Stop


def test_a_hook_call_on_the_fast_path_leaves_out_the_libraries_only_rare_branches_need(tmp_path: Path) -> None:
    for event in (post("a0"), post("a1"), post("a2"), turn("Stop")):
        modules = imported_modules(event, tmp_path)
        assert [m for m in modules if m.partition(".")[0] in LEFT_OUT] == []
        assert "otel_repeat_guard.store.model_rows" not in modules  # the model calls' rows: never a hook's
    assert table(tmp_path / "store.db", "SELECT run_length FROM tool_calls") == [(1,), (2,), (3,)]


LEFT_OUT = (
    "msgspec",
    "typing_extensions",
    "logging",
    "hashlib",
    "_hashlib",
    "difflib",
    "shlex",
    "decimal",
    "pathlib",
    "urllib",
    "ipaddress",
    "inspect",
    "ast",
    "dis",
    "tokenize",
)
"""What a fast-path call does without (issue 40, item 5: a call at most 50 ms): msgspec (the hook's keys are read by
orjson), inspect with ast, dis and tokenize (dataclasses' import of it is deferred by the hook's entry until a name
is read: ``otel_repeat_guard_entry.defer_inspect``), logging (imported when a warning is said), hashlib (a reminder
variant's draw), difflib (a "did you mean"), shlex (a store's message), pathlib with urllib and ipaddress (the
store's and the hook's paths are text: ``store/path_text.py``)."""


def test_with_a_collector_the_hook_imports_the_sdk_and_the_whole_package(tmp_path: Path) -> None:
    modules = imported_modules(post("a0"), tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9")
    assert "opentelemetry.sdk.trace" in modules and "otel_repeat_guard.setup.configure" in modules

"""The Claude Agent SDK adapter with the real bundled Claude Code CLI (issue 24, item 1), offline.

The CLI runs its tools itself (real Bash calls here) and calls the fake Messages API on 127.0.0.1; the
hooks are the guard's only view of the calls, so every test reads what reached the model in the fake
server's requests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider

from otel_repeat_guard import GuardConfig
from otel_repeat_guard.integrations.claude_agent_sdk import RepeatGuardHooks

from .claude_cases import (
    ALPHA,
    DETAILED_5,
    DETAILED_8,
    ECHO,
    GENTLE,
    LOOP9,
    PARALLEL_CALLS,
    PARALLEL_RUNS,
    in_tool_results,
    loop_conversation,
    offline_env,
    parallel_script,
    reminder_positions,
    tool_results,
)
from .fake_anthropic import FakeAnthropic
from .scenario import Guarded, assert_whole_chain, expected_whole_chain, make_guarded, provider_for, require

sdk = require("claude_agent_sdk")


def run_claude(server: FakeAnthropic, home: Path, prompt: str, hooks: RepeatGuardHooks, tools: Sequence[str]) -> None:
    options = sdk.ClaudeAgentOptions(
        env=offline_env(server, home), hooks=hooks.hooks(), allowed_tools=list(tools), cwd=str(home), max_turns=30
    )

    async def go() -> None:
        async for _ in sdk.query(prompt=prompt, options=options):
            pass

    asyncio.run(go())


def guarded_hooks(g: Guarded) -> tuple[RepeatGuardHooks, TracerProvider]:
    provider = provider_for(g)
    return RepeatGuardHooks(guard=g.guard, inbox=g.inbox, tracer_provider=provider), provider


def run_lengths_by_key(g: Guarded) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for span in g.exporter.get_finished_spans():
        attributes = span.attributes or {}
        if attributes.get("gen_ai.operation.name") != "execute_tool":
            continue
        repeat = next((e for e in span.events if e.name == "repeat_tool_guard.repeat"), None)
        run = int(str((repeat.attributes or {}).get("repeat_tool_guard.run_length", 1))) if repeat else 1
        out.setdefault(str(attributes["gen_ai.agent.id"]), []).append(run)
    return out


def test_the_reminders_reach_claude_after_calls_3_5_and_8_beside_the_untouched_tool_results(tmp_path: Path) -> None:
    g = make_guarded(store=tmp_path / "store.db")
    hooks, provider = guarded_hooks(g)
    with FakeAnthropic(script=LOOP9) as server:
        run_claude(server, tmp_path / "home", "LOOP-TASK: print the word", hooks, ["Bash"])
    provider.shutdown()
    requests = loop_conversation(server, "LOOP-TASK")
    assert len(requests) == 10  # nine calls, then the answer
    assert reminder_positions(requests, GENTLE) == list(range(3, 10))  # the history keeps it once delivered
    assert reminder_positions(requests, DETAILED_5) == list(range(5, 10))
    assert reminder_positions(requests, DETAILED_8) == [8, 9]
    for i, body in enumerate(requests):  # each request carries the reminders delivered so far, nothing more
        assert sum(text.count("You have called `Bash`") for kind, text in _texts(body) if kind != "tool_result") == (
            (i >= 3) + (i >= 5) + (i >= 8)
        ), i
    assert not in_tool_results(requests, "You have called")
    assert tool_results(requests[9]) == ["looping"] * 9  # the real Bash output, as the CLI gave it
    (key,) = run_lengths_by_key(g)
    assert key.startswith("claude:") and "/" not in key
    assert run_lengths_by_key(g)[key] == list(range(1, 10))
    # The SDK closes the CLI's control channel before the CLI's SessionEnd hook, so the program ends the session:
    assert g.guard.run_length(key) == 9
    hooks.forget_session(key.removeprefix("claude:"))
    assert g.guard.run_length(key) == 0
    # No model span is in this process (the CLI calls the model), so nothing is wasted by an issuer and the
    # timeline holds only the tool calls; the other figures are the scenario's.
    expected = expected_whole_chain(LOOP9)
    expected.update({"store: wasted tokens": {"input": 0, "output": 0}, "timeline: model calls": 0})
    expected["metric: wasted tokens"] = {"input": 0, "output": 0}
    assert g.store is not None
    try:
        assert_whole_chain(g, expected, tool="Bash")
    finally:
        g.store.shutdown()


def _texts(body: dict[str, Any]) -> list[tuple[str, str]]:
    from .claude_cases import texts

    return texts(body)


def test_a_subagents_calls_keep_their_own_chain_and_never_extend_the_parents(tmp_path: Path) -> None:
    g = make_guarded()
    hooks, provider = guarded_hooks(g)
    agent = {
        "description": "Echo thrice",
        "prompt": "SUB-TASK: print the word",
        "subagent_type": "general-purpose",
        "run_in_background": False,
    }
    main: Any = (("Bash", ECHO), ("Bash", ECHO), ("Agent", agent))
    sub = (("Bash", ECHO),) * 3
    with FakeAnthropic(script=main, by_prompt={"SUB-TASK": sub}) as server:
        run_claude(server, tmp_path / "home", "MAIN-TASK: print the word", hooks, ["Bash", "Agent"])
    provider.shutdown()
    runs = run_lengths_by_key(g)
    (parent,) = [key for key in runs if "/" not in key]
    (child,) = [key for key in runs if "/" in key]
    assert child.startswith(parent + "/")
    assert runs[parent] == [1, 2, 1]  # Bash, Bash, then the Agent call once the subagent is done
    assert runs[child] == [1, 2, 3]
    assert reminder_positions(loop_conversation(server, "SUB-TASK"), GENTLE) == [3]
    assert reminder_positions(loop_conversation(server, "MAIN-TASK"), "You have called") == []


def test_the_stop_tier_denies_the_next_identical_call_with_the_stop_text_and_the_denied_calls_count(
    tmp_path: Path,
) -> None:
    g = make_guarded(config=GuardConfig(thresholds=(3,), stop_at=4))
    hooks, provider = guarded_hooks(g)
    marks = tmp_path / "home" / "ran.txt"
    call = {"command": f"echo ran >> {marks}", "description": "Mark a run"}
    with FakeAnthropic(script=(("Bash", call),) * 6) as server:
        run_claude(server, tmp_path / "home", "STOP-TASK: mark it", hooks, ["Bash"])
    provider.shutdown()
    assert marks.read_text().splitlines() == ["ran"] * 4  # calls 5 and 6 never ran
    requests = loop_conversation(server, "STOP-TASK")
    stop = next(r for r in g.reminders if r.tier == "stop")
    results = tool_results(requests[-1])
    assert len(results) == 6 and all(stop.text in text for text in results[4:]), results
    assert not any(stop.text in text for text in results[:4])
    assert reminder_positions(requests, stop.text)[:1] == [4]  # the stop text also came with call 4's result
    assert run_lengths_by_key(g) == {stop.agent_id: [1, 2, 3, 4, 5, 6]}  # denied, each still counted once
    failed = [s for s in g.exporter.get_finished_spans() if not s.status.is_ok]
    assert len(failed) == 2


def test_failed_calls_count_and_are_reminded_like_any_other(tmp_path: Path) -> None:
    g = make_guarded()
    hooks, provider = guarded_hooks(g)
    failing = {"command": "echo broken >&2; exit 3", "description": "Fail"}
    with FakeAnthropic(script=(("Bash", failing),) * 3) as server:
        run_claude(server, tmp_path / "home", "FAIL-TASK: try it", hooks, ["Bash"])
    provider.shutdown()
    assert reminder_positions(loop_conversation(server, "FAIL-TASK"), GENTLE) == [3]
    spans = [s for s in g.exporter.get_finished_spans() if s.name == "execute_tool Bash"]
    assert [s.status.is_ok for s in spans] == [False] * 3


def test_a_new_prompt_starts_the_chain_afresh_and_todowrite_is_left_out(tmp_path: Path) -> None:
    g = make_guarded()
    hooks, provider = guarded_hooks(g)
    todo = {"todos": [{"content": "print", "status": "in_progress", "activeForm": "Printing"}]}
    script: Any = (("Bash", ECHO), ("TodoWrite", todo), ("Bash", ECHO))
    with FakeAnthropic(script=script) as server:
        options = sdk.ClaudeAgentOptions(
            env=offline_env(server, tmp_path / "home"),
            hooks=hooks.hooks(),
            allowed_tools=["Bash", "TodoWrite"],
            cwd=str(tmp_path / "home"),
        )

        async def two_prompts() -> None:
            async with sdk.ClaudeSDKClient(options=options) as client:
                for prompt in ("FIRST: print", "SECOND: print"):
                    await client.query(prompt)
                    async for _ in client.receive_response():
                        pass

        asyncio.run(two_prompts())
    provider.shutdown()
    runs = run_lengths_by_key(g)
    assert list(runs.values()) == [[1, 2, 1, 2]]  # TodoWrite neither counts nor breaks; the 2nd prompt restarts
    assert not any(s.name == "execute_tool TodoWrite" for s in g.exporter.get_finished_spans())


def test_the_default_exclusions_leave_todowrite_out_while_a_custom_list_replaces_them() -> None:
    g = make_guarded()
    provider = provider_for(g)
    todo = {"session_id": "s1", "hook_event_name": "PostToolUse", "tool_name": "TodoWrite", "tool_input": {"a": 1}}
    default = RepeatGuardHooks(guard=g.guard, inbox=g.inbox, tracer_provider=provider)
    assert asyncio.run(default.post_tool_use(todo, "t1", None)) == {}
    assert g.exporter.get_finished_spans() == ()
    custom = RepeatGuardHooks(guard=g.guard, inbox=g.inbox, tracer_provider=provider, exclude=("Read",))
    asyncio.run(custom.post_tool_use(todo, "t2", None))
    assert [s.name for s in g.exporter.get_finished_spans()] == ["execute_tool TodoWrite"]


def test_calls_the_permissions_refuse_count_though_no_hook_follows_them(tmp_path: Path) -> None:
    g = make_guarded()
    hooks, provider = guarded_hooks(g)
    write = {"file_path": "/etc/repeat-guard-test.txt", "content": "x"}
    script: Any = (("Write", write),) * 3 + (("Bash", ECHO),)
    with FakeAnthropic(script=script) as server:
        run_claude(server, tmp_path / "home", "DENIED-TASK: write it", hooks, ["Bash"])  # Write is not allowed
    provider.shutdown()
    spans = [s for s in g.exporter.get_finished_spans() if s.name.startswith("execute_tool")]
    assert [(s.name, s.status.is_ok) for s in spans] == [("execute_tool Write", False)] * 3 + [
        ("execute_tool Bash", True)
    ]
    assert list(run_lengths_by_key(g).values()) == [[1, 2, 3, 1]]
    requests = loop_conversation(server, "DENIED-TASK")
    assert reminder_positions(requests, "You have called `Write` with identical arguments 3 times in a row") == [4]


def test_a_hook_given_what_no_cli_sends_answers_nothing_and_raises_nothing(caplog: Any) -> None:
    g = make_guarded()
    hooks = RepeatGuardHooks(guard=g.guard, inbox=g.inbox, tracer_provider=provider_for(g))
    for callback in (hooks.pre_tool_use, hooks.post_tool_use, hooks.user_prompt_submit, hooks.stop):
        assert asyncio.run(callback(["not", "a", "mapping"], None, None)) == {}
    assert "repeat guard failed" in caplog.text


def test_parallel_calls_that_end_out_of_order_count_once_each_in_the_order_asked_and_only_the_refused_one_failed(
    tmp_path: Path,
) -> None:
    g = make_guarded()
    hooks, provider = guarded_hooks(g)
    with FakeAnthropic(script=parallel_script(tmp_path / "home", tmp_path / "outside.txt")) as server:
        run_claude(server, tmp_path / "home", "PARALLEL-TASK: read them", hooks, ["Bash"])
    provider.shutdown()
    spans = [s for s in g.exporter.get_finished_spans() if s.name.startswith("execute_tool")]
    assert [(str((s.attributes or {})["gen_ai.tool.name"]), not s.status.is_ok) for s in spans] == PARALLEL_CALLS
    assert list(run_lengths_by_key(g).values()) == [PARALLEL_RUNS]
    assert "haven't granted it" in str(spans[3].status.description)  # the refusal, as the transcript has it
    results = tool_results(loop_conversation(server, "PARALLEL-TASK")[-1])  # as the calls ended
    assert results[:3] == [ALPHA, ALPHA, "slow"] and results[5] == "slow", results  # the first asked ended last

"""The Claude Code hook reads every event Claude Code writes: its JSON is Node's ``JSON.stringify``, which writes
output cut inside a character as a lone surrogate escape. An event it could not read was skipped, and the
next call then looked like one more of the run it broke (a false reminder)."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import pytest

from otel_repeat_guard.cli.claude_code_hook import main

SESSION = "0b7c4c9e-3b1a-4f43-9d4e-1d2b7e0f5a61"


def _event(command: str, stdout: str = "a b") -> bytes:
    event = {
        "session_id": SESSION,
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_response": {"stdout": stdout, "stderr": ""},
        "tool_use_id": f"t-{command}-{len(stdout)}",
    }
    return json.dumps(event).encode()


def _answer(data: bytes, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main([]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


@pytest.mark.parametrize(
    "cut", [b'"truncated \\ud83d"', b'"\\udc00 alone"', b"[" * 2_000 + b"1" + b"]" * 2_000], ids=repr
)
def test_an_event_with_a_lone_surrogate_or_deep_output_is_read_and_breaks_the_run(
    cut: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OTEL_REPEAT_GUARD_DB", str(tmp_path / "store.db"))
    answers = [_answer(_event("ls"), monkeypatch, capsys) for _ in range(2)]
    odd = _event("cat f", "x").replace(b'"x"', cut)  # the output of `cat f`, as Node wrote it
    answers.append(_answer(odd, monkeypatch, capsys))
    answers.append(_answer(_event("ls"), monkeypatch, capsys))  # a new run of one: `cat f` broke the last
    assert answers == ["", "", "", ""]


def test_a_reminder_quoting_a_lone_surrogate_quotes_its_escape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OTEL_REPEAT_GUARD_DB", str(tmp_path / "store.db"))
    monkeypatch.setenv("OTEL_REPEAT_GUARD_THRESHOLDS", "2,3")  # the second tier, detailed, quotes the call
    event = _event("echo X").replace(b'"command": "echo X"', b'"command": "echo \\ud83d"')
    answers = [_answer(event, monkeypatch, capsys) for _ in range(3)]
    assert answers[0] == ""
    context = json.loads(answers[2])["hookSpecificOutput"]["additionalContext"]
    assert "3 times in a row" in context and '{"command":"echo \\ud83d"}' in context  # quoted as its escape


@pytest.mark.parametrize(("argv", "shown_on"), [(["--help"], "out"), (["-h"], "out"), (["--bogus"], "err")])
def test_a_person_asking_for_help_gets_the_usage_not_a_wait_on_stdin(
    argv: list[str], shown_on: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Claude Code passes no arguments; a person typing ``--help`` waited on a terminal for JSON, silently."""

    class Unread(io.BytesIO):
        def read(self, *size: int | None) -> bytes:
            raise AssertionError("stdin was read")

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(Unread()))
    assert main(argv) == 0
    out, err = capsys.readouterr()
    shown = out if shown_on == "out" else err
    assert shown.startswith("usage: otel-repeat-guard claude-code-hook < EVENT.json") and "always exits 0" in shown


def test_a_store_that_cannot_be_written_costs_the_row_not_the_reminder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "notes.txt"
    store.write_text("not a store\n")
    monkeypatch.setenv("OTEL_REPEAT_GUARD_DB", str(store))
    said = []
    for _ in range(3):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(_event("ls"))))
        assert main([]) == 0
        said.append(capsys.readouterr())
    assert "3 times in a row" in json.loads(said[2].out)["hookSpecificOutput"]["additionalContext"]
    assert [err.count("\n") for _, err in said] == [1, 1, 1]
    assert said[2].err.startswith("otel-repeat-guard claude-code-hook: the call is counted, but not stored: ")
    assert store.read_text() == "not a store\n"


def _write(content: str) -> bytes:
    event = {
        "session_id": SESSION,
        "hook_event_name": "PostToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": "/src/big.txt", "content": content},
        "tool_response": {"type": "create"},
        "tool_use_id": f"t-{len(content)}-{content[-3:]}",
    }
    return json.dumps(event).encode()


def test_calls_whose_inputs_differ_only_past_the_kept_length_are_different_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The span keeps the first MiB of a call's input; the cut text was compared, so three writes of one large file
    changed near its end were reminded of as identical calls."""
    monkeypatch.setenv("OTEL_REPEAT_GUARD_DB", str(tmp_path / "store.db"))
    big = "a" * (1 << 20)
    changed = [_answer(_write(f"{big} v{n}"), monkeypatch, capsys) for n in range(3)]
    assert changed == ["", "", ""]
    same = [_answer(_write(f"{big} v9"), monkeypatch, capsys) for _ in range(3)]  # the same large write, thrice
    assert same[:2] == ["", ""]
    context = json.loads(same[2])["hookSpecificOutput"]["additionalContext"]
    assert "You have called `Write` with identical arguments 3 times in a row" in context


def test_a_store_path_that_names_no_file_is_said_and_makes_no_chains_file_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """OTEL_REPEAT_GUARD_DB=/dev/null made /dev/null.chains.db; a directory made <directory>.chains.db."""
    folder = tmp_path / "stores"
    folder.mkdir()
    monkeypatch.setenv("OTEL_REPEAT_GUARD_DB", str(folder))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(_event("ls"))))
    assert main([]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"otel-repeat-guard claude-code-hook: StoreAccessError: {folder} is a directory: give the store's file, "
        f"such as {folder / 'repeat-guard.db'} (the guard skipped this event)\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stores"]


@pytest.mark.parametrize(
    ("event", "said"),
    [
        ({"session_id": SESSION, "tool_name": "Bash", "tool_input": {}}, "the event has no hook_event_name"),
        (
            {"session_id": SESSION, "hook_event_name": "PostToolUse", "tool_input": {}},
            "the PostToolUse event has no tool_name",
        ),
    ],
)
def test_a_tool_event_missing_its_name_is_said_not_skipped_in_silence(
    event: dict[str, object], said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(event).encode())))
    assert main([]) == 0
    assert capsys.readouterr() == (
        "",
        f"otel-repeat-guard claude-code-hook: ValueError: {said} (the guard skipped this event)\n",
    )


def test_the_hook_is_a_listed_subcommand_of_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    """It was named only in the epilog: the list of subcommands left it out."""
    from otel_repeat_guard.cli.main import main as cli

    with pytest.raises(SystemExit):
        cli(["--help"])
    listing = capsys.readouterr().out
    assert re.search(r"^ +claude-code-hook +Claude Code's command hook", listing, re.MULTILINE), listing
    assert "{demo,dashboard,ingest,doctor,rollup,claude-code-hook}" in listing

"""Every refusal of the command line is exit 2 and one line on stderr, naming what is wrong: bad options,
bad environment values and bad store URLs alike, never a traceback or argparse's usage block."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CAPTURE = Path(__file__).parent.parent / "fixtures" / "langchain_openinference" / "spans.jsonl"


def _refused(argv: list[str], env: dict[str, str], tmp_path: Path) -> str:
    environment = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **env}
    done = subprocess.run(
        [sys.executable, "-m", "otel_repeat_guard.cli.main", *argv],
        capture_output=True, text=True, timeout=120, env=environment, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    return done.stderr


CASES = {
    "a bad threshold in the environment, doctor": (
        ["doctor", str(CAPTURE)],
        {"OTEL_REPEAT_GUARD_THRESHOLDS": "1"},
        "error: OTEL_REPEAT_GUARD_THRESHOLDS: thresholds must be at least 2",
    ),
    "an empty exclude in the environment, ingest": (
        ["ingest", str(CAPTURE), "--db", "x.db"],
        {"OTEL_REPEAT_GUARD_EXCLUDE": ""},
        "error: OTEL_REPEAT_GUARD_EXCLUDE is set but empty",
    ),
    "an option argparse refuses": (["demo", "--agents", "0"], {}, "argument --agents: must be at least 1, got 0"),
    "a missing required option": (["rollup"], {}, "the following arguments are required: --store"),
    "an unknown option": (["doctor", "--bogus"], {}, "unrecognized arguments: --bogus"),
    "digits of another script": (["demo", "--agents", "\u0663"], {}, "argument --agents: must be a whole number"),
    "an empty store path, which would read as the current directory": (
        ["dashboard", "--db", ""],
        {},
        "argument --db: give the store's file, such as ./repeat-guard.db, not an empty path",
    ),
    "an endless poll": (["ingest", str(CAPTURE), "--follow", "--poll", "inf"], {}, "argument --poll: must be"),
    "a poll of no time at all": (["ingest", str(CAPTURE), "--follow", "--poll", "0"], {}, "argument --poll: must be"),
    "an endless settle": (["rollup", "--store", "chdb:///tmp/x?rollup=g", "--settle", "inf"], {}, "--settle: must be"),
    "a time past what nanoseconds hold": (
        ["doctor", "--store", "chdb:///tmp/x", "--since", "2300-01-01"],
        {},
        "argument --since: must be a time before 2262-04-11",
    ),
    "a duration of 321 digits, doctor": (
        ["doctor", "--store", "chdb:///no/such/dir", "--since", "1" + "0" * 320 + "d"],
        {},
        "otel-repeat-guard: error: ",  # read from the epoch on: the refusal is the missing directory's
    ),
    "a duration of 321 digits with a fraction, ingest": (
        ["ingest", "--from", "chdb:///no/such/dir", "--db", "x.db", "--until", "1" + "0" * 320 + ".5s"],
        {},
        "otel-repeat-guard: error: ",
    ),
    "an OTel variable the SDK would refuse naming none, demo --otlp": (
        ["demo", "--otlp", "--db", "x.db", "--seconds", "0"],
        {"OTEL_METRIC_EXPORT_INTERVAL": "-5"},
        "otel-repeat-guard: error: OTEL_METRIC_EXPORT_INTERVAL must be a number above 0, got '-5'",
    ),
    "an OTel variable the SDK would meet with a traceback, demo --otlp": (
        ["demo", "--otlp", "--db", "x.db", "--seconds", "0"],
        {"OTEL_BSP_MAX_QUEUE_SIZE": "lots"},
        "otel-repeat-guard: error: OTEL_BSP_MAX_QUEUE_SIZE must be a whole number from 1 to 2,147,483,647, got 'lots'",
    ),
    "a malformed store URL": (["doctor", "--store", "clickhouse://u@[::1/otel"], {}, "is no valid store URL"),
    "a trace URL in the environment without its trace id": (
        ["dashboard", "--db", "missing.db"],
        {"OTEL_REPEAT_GUARD_TRACE_URL": "http://jaeger/trace"},
        "OTEL_REPEAT_GUARD_TRACE_URL: the trace URL template must contain {trace_id}",
    ),
}


@pytest.mark.parametrize(("argv", "env", "said"), list(CASES.values()), ids=list(CASES))
def test_a_refusal_is_exit_2_and_one_line(argv: list[str], env: dict[str, str], said: str, tmp_path: Path) -> None:
    assert said in _refused(argv, env, tmp_path)


def test_a_password_file_that_is_not_text_is_refused_in_one_line(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_bytes(b"\xff\xfe\x00binary")
    err = _refused(
        ["doctor", "--store", "clickhouse://reader@127.0.0.1:1/otel"],
        {"OTEL_REPEAT_GUARD_CLICKHOUSE_PASSWORD_FILE": str(secret)},
        tmp_path,
    )
    assert f"cannot read the ClickHouse password file $OTEL_REPEAT_GUARD_CLICKHOUSE_PASSWORD_FILE ({secret})" in err


def test_a_duration_of_any_size_reads_as_a_time_from_the_epoch_on() -> None:
    import time

    from otel_repeat_guard.cli.ingest import time_point

    assert time_point("1" + "0" * 320 + "d") == 0 == time_point("9" * 5000 + ".5s")
    assert abs(time_point("90m") - (time.time_ns() - 90 * 60 * 10**9)) < 60 * 10**9

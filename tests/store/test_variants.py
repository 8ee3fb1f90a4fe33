"""An experiment's reminders in the embedded store: each call's variant kept (schema 8), and the by-variant table
(``reminder_variants``) equal to counts made without it: from the script the runs followed, and by plain SQL over
the stored calls."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from otel_repeat_guard.core.reminders import variant_for
from otel_repeat_guard.dashboard.source import SQLiteReader
from otel_repeat_guard.store import SCHEMA_VERSION
from otel_repeat_guard.store.queries import Filters
from otel_repeat_guard.store.queries.variants import variant_counts
from tests.store.loop_agent import upgraded_from
from tests.store.variant_agents import CONFIG, TOKENS, Scripted, expected, experiment

Experiment = tuple[Path, list[Scripted]]


@pytest.fixture(scope="module")
def wording(tmp_path_factory: pytest.TempPathFactory) -> Experiment:
    db = tmp_path_factory.mktemp("wording") / "store.db"
    scripted, _spans, _reminders = experiment(db, runs=120)
    return db, scripted


def _table(db: Path, filters: Filters | None = None) -> list[object]:
    return variant_counts(SQLiteReader(db).reminder_variants(filters or Filters()))  # type: ignore[attr-defined]


def test_the_by_variant_table_equals_the_count_the_script_implies(wording: Experiment) -> None:
    db, scripted = wording
    assert {run.variant for run in scripted if run.length >= 3} == {"seed", "redirect"}
    assert all(run.variant == variant_for(run.key, CONFIG.reminder_variants) for run in scripted if run.key)
    assert _table(db) == expected(scripted)


def test_the_by_variant_table_equals_a_plain_sql_count_of_the_stored_calls(wording: Experiment) -> None:
    """Per variant, by window functions over the calls rather than the reader's correlated lookups: the next call
    of each reminded call, and each run's loop (one per run here) from its longest run length."""
    db, _ = wording
    with sqlite3.connect(db) as conn:
        outcomes = dict(
            ((variant, outcome), n)
            for variant, outcome, n in conn.execute(
                """SELECT reminder_variant, CASE WHEN next_run = run_length + 1 THEN 'ignored'
                                                 WHEN next_run IS NULL THEN 'open' ELSE 'broken' END, COUNT(*)
                   FROM (SELECT *, LEAD(run_length) OVER (PARTITION BY agent_key ORDER BY start_ns) AS next_run
                         FROM tool_calls)
                   WHERE reminder_tier IN ('gentle', 'detailed') GROUP BY 1, 2"""
            )
        )
        waste = dict(
            (variant, (loops, calls))
            for variant, loops, calls in conn.execute(
                """SELECT variant, COUNT(*), SUM(longest - 3) FROM (
                       SELECT agent_key, MAX(reminder_variant) AS variant, MAX(run_length) AS longest
                       FROM tool_calls WHERE tool_name = 'read_file' GROUP BY agent_key HAVING MAX(run_length) >= 3)
                   GROUP BY variant"""
            )
        )
        charged = dict(
            conn.execute(
                """SELECT t.reminder_variant, SUM(m.input_tokens + m.output_tokens)
                   FROM tool_calls AS t JOIN model_calls AS m ON m.agent_key = t.agent_key
                   WHERE t.reminder_threshold = 3 AND m.wasted_tool IS NOT NULL AND m.start_ns > t.end_ns
                   GROUP BY 1"""
            )
        )
    for variant in ("seed", "redirect"):
        rows = [row for row in _table(db) if row.variant == variant]  # type: ignore[attr-defined]
        assert sum(r.reminders for r in rows) == sum(n for (v, _o), n in outcomes.items() if v == variant)
        assert sum(r.broken for r in rows) == outcomes.get((variant, "broken"), 0)
        assert sum(r.ignored for r in rows) == outcomes[(variant, "ignored")]
        assert (sum(r.loops for r in rows), sum(r.wasted_calls for r in rows)) == waste[variant]
        assert sum(r.wasted_tokens for r in rows) == charged[variant] == waste[variant][1] * TOKENS


def test_the_filters_narrow_the_variant_table(wording: Experiment) -> None:
    db, scripted = wording
    one = next(run for run in scripted if run.length >= 5)
    chosen = [row for row in _table(db, Filters(agents=(one.key.split("#")[0],)))]
    assert [(r.variant, r.model, r.reminders, r.loops) for r in chosen] == [
        (one.variant, one.model, 2 + (one.length >= 8), 1)
    ]  # type: ignore[attr-defined]
    assert _table(db, Filters(tiers=("stop",))) == []


def test_a_store_without_an_experiment_has_an_empty_variant_table(tmp_path: Path) -> None:
    from tests.store.loop_agent import every_kind

    every_kind(tmp_path / "plain.db")
    assert _table(tmp_path / "plain.db") == []
    with sqlite3.connect(tmp_path / "plain.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM tool_calls WHERE reminder_variant IS NOT NULL").fetchone() == (0,)


def test_a_schema_7_store_is_upgraded_to_8_keeping_its_calls(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    experiment(db, runs=4)
    with sqlite3.connect(db) as conn:
        before = conn.execute("SELECT COUNT(*), COUNT(reminder_tier) FROM tool_calls").fetchone()
    upgraded_from(db, 7, "ALTER TABLE tool_calls DROP COLUMN reminder_variant")
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*), COUNT(reminder_tier) FROM tool_calls").fetchone() == before
        assert conn.execute("SELECT COUNT(reminder_variant) FROM tool_calls").fetchone() == (0,)  # not kept then
        assert conn.execute("SELECT version FROM repeat_guard_schema").fetchone() == (SCHEMA_VERSION,)
    assert _table(db) == []


def test_doctor_store_prints_the_table_and_refuses_a_missing_store_in_one_line(
    wording: Experiment, tmp_path: Path
) -> None:
    import json
    import subprocess
    import sys

    from otel_repeat_guard.core.experiments import table_lines, variant_table

    db, scripted = wording
    command = [sys.executable, "-m", "otel_repeat_guard.cli.main", "doctor", "--store"]
    done = subprocess.run([*command, str(db)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:] == table_lines(variant_table(expected(scripted)))
    as_json = subprocess.run([*command, str(db), "--json"], capture_output=True, text=True, timeout=120, check=False)
    document = json.loads(as_json.stdout)
    assert [row["variant"] for row in document["by_variant"]] == ["redirect", "seed"]
    assert document["verdict"] == variant_table(expected(scripted)).verdict
    missing = subprocess.run(
        [*command, str(tmp_path / "none.db")], capture_output=True, text=True, timeout=120, check=False
    )
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
    assert "no store at" in missing.stderr

"""``ingest --replay`` of an experiment's traces: a trace recorded with the guard passes through the replay as it
was, so each reminder keeps the variant its run drew live, and the store holds the same variants as the live one."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from otel_repeat_guard.core.reminders import variant_for
from tests.ingest.otlp import batches, otlp_json_line, write_lines
from tests.store.variant_agents import CONFIG, experiment


def _reminded(db: Path) -> list[tuple[str, str, str | None]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT agent_key, reminder_tier, reminder_variant FROM tool_calls WHERE reminder_tier IS NOT NULL"
            " ORDER BY agent_key, run_length"
        ).fetchall()


def test_an_ingest_with_replay_keeps_the_variant_each_run_drew_live(tmp_path: Path) -> None:
    _script, spans, reminders = experiment(tmp_path / "live.db", runs=30)
    path = write_lines(tmp_path / "traces.jsonl", [otlp_json_line(b) for b in batches(spans, 7)])
    live = _reminded(tmp_path / "live.db")
    assert len(live) == len(reminders) > 30
    assert all(variant == variant_for(key, CONFIG.reminder_variants) for key, _tier, variant in live)
    assert {variant for _key, _tier, variant in live} == {"seed", "redirect"}

    env = {"OTEL_REPEAT_GUARD_REMINDER_VARIANTS": "seed,redirect", "PATH": "/usr/bin:/bin"}
    command = [sys.executable, "-m", "otel_repeat_guard.cli.main", "ingest", "--replay", "--quiet", "--db"]
    for name in ("replayed.db", "again.db"):
        arguments = [*command, str(tmp_path / name), str(path)]
        done = subprocess.run(arguments, env=env, capture_output=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        assert _reminded(tmp_path / name) == live

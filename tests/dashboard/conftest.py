"""Stores seeded by the demo's scripted scenario, through the real runner."""

from __future__ import annotations

from pathlib import Path

import pytest

from otel_repeat_guard.demo.runner import run_scenario
from otel_repeat_guard.demo.scenario import AgentScript, scenario

AGENTS = 4


@pytest.fixture(scope="session")
def scripts() -> tuple[AgentScript, ...]:
    return scenario(AGENTS)


@pytest.fixture(scope="session")
def seeded_db(tmp_path_factory: pytest.TempPathFactory, scripts: tuple[AgentScript, ...]) -> Path:
    db = tmp_path_factory.mktemp("seeded") / "demo.db"
    run_scenario(scripts, db)
    return db

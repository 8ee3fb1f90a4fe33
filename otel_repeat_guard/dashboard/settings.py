"""Where the dashboard reads from and where its trace links point, from the environment.

The ``otel-repeat-guard dashboard`` command sets these variables for the Streamlit process.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from otel_repeat_guard.store.schema import DB_ENV, DEFAULT_DB

TRACE_URL_ENV = "OTEL_REPEAT_GUARD_TRACE_URL"
STORE_ENV = "OTEL_REPEAT_GUARD_DASHBOARD_STORE"
"""A ClickHouse store URL (``clickhouse://…``, ``chdb://DIR``) the dashboard reads instead of the SQLite file."""
JAEGER_TRACE_URL = "http://localhost:16686/trace/{trace_id}"
"""The template the compose stack sets (its Jaeger); the dashboard links to no trace UI unless one is set."""
REFRESH_SECONDS = 5


@dataclass(frozen=True, slots=True)
class Settings:
    db: Path
    trace_url: str | None = None
    clickhouse: str | None = None
    """The ClickHouse store URL (``--store`` / ``$OTEL_REPEAT_GUARD_DASHBOARD_STORE``); None: the SQLite store ``db``."""
    """The trace link template (``--trace-url`` / ``$OTEL_REPEAT_GUARD_TRACE_URL``); None: no trace links."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        return cls(Path(env.get(DB_ENV) or DEFAULT_DB), env.get(TRACE_URL_ENV) or None, env.get(STORE_ENV) or None)

    @property
    def store(self) -> str:
        """What the reads are asked of: the ClickHouse URL if one is set, else the SQLite file."""
        return self.clickhouse or str(self.db)

    def trace_link(self, trace_id: str, span_id: str = "") -> str | None:
        """The trace URL for one call (``{trace_id}`` and ``{span_id}`` filled in), or None without a template."""
        if self.trace_url is None:
            return None
        return self.trace_url.replace("{trace_id}", trace_id).replace("{span_id}", span_id)


def check_trace_url(template: str) -> str:
    """The template if it names ``{trace_id}``; otherwise a ValueError saying so."""
    if "{trace_id}" not in template:
        raise ValueError(f"the trace URL template must contain {{trace_id}}, got {template!r}")
    return template

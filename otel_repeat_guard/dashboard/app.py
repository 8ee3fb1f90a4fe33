"""The Streamlit app: reads settings, draws the sidebar's filters, and hands over to the page the URL names
(``views/``, through ``st.navigation``: each page has its own address). No SQL here."""

from __future__ import annotations

import shlex
import sqlite3

import streamlit as st

from otel_repeat_guard.dashboard import VIEWS, reads, view
from otel_repeat_guard.dashboard.sections import sidebar
from otel_repeat_guard.dashboard.settings import REFRESH_SECONDS, Settings
from otel_repeat_guard.store.schema import StoreError

FEED_HELP = """
This store has no tool calls yet. Feed it in any of three ways:

* run the scripted demo: `otel-repeat-guard demo --db {db}`;
* ingest an OpenTelemetry Collector's file-exporter output:
  `otel-repeat-guard ingest /var/lib/otel/traces.jsonl --db {db}` (add `--follow` to keep up with it);
* or export your agent's spans into it, next to the guard:

```python
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from otel_repeat_guard import ReminderInbox, RepeatGuardSpanProcessor
from otel_repeat_guard.store import SQLiteSpanExporter

inbox = ReminderInbox()  # your harness drains it before each model request (docs/runtimes.md)
provider = TracerProvider()
provider.add_span_processor(RepeatGuardSpanProcessor(on_reminder=inbox.put))  # its decisions go on the spans
provider.add_span_processor(BatchSpanProcessor(SQLiteSpanExporter("{db}")))
```

Tool spans (`gen_ai.operation.name = execute_tool`) and model calls (`chat`) appear here a few seconds after they end.
"""


CLICKHOUSE_FEED_HELP = """
This ClickHouse table holds no tool spans (`gen_ai.operation.name = execute_tool`) yet. Point the Collector's
`clickhouse` exporter at it, and add the guard to your agents' processes so their spans carry its findings
(`repeat_tool_guard.*` events and attributes); see docs/operations.md, "Teams that run ClickHouse".
"""


# (file, title, address, icon): the first is the default page, at the app's root address.
PAGES = (
    ("overview.py", "Overview", "overview", ":material/dashboard:"),
    ("hotspots.py", "Hotspots", "hotspots", ":material/local_fire_department:"),
    ("reminders.py", "Reminders", "reminders", ":material/notifications:"),
    ("runs.py", "Runs", "runs", ":material/timeline:"),
    ("conversations.py", "Conversations", "conversations", ":material/forum:"),
    ("blind_spots.py", "Blind spots", "blind-spots", ":material/visibility_off:"),
)


def pages() -> list[st.Page]:
    return [
        st.Page(VIEWS / name, title=title, url_path=address, icon=icon, default=index == 0)
        for index, (name, title, address, icon) in enumerate(PAGES)
    ]


@st.fragment(run_every=REFRESH_SECONDS)
def _wait_for_calls(db: str) -> None:
    """An empty store's page looks again every few seconds, and draws the dashboard once calls arrive."""
    st.caption(f"This page looks at the store every {REFRESH_SECONDS} s and shows the calls as they arrive.")
    try:
        arrived = reads.has_data(db) and int(reads.time_bounds(db).iloc[0]["rows"]) > 0
    except (StoreError, sqlite3.Error):
        return  # the store is being created: the next look will tell
    if arrived:
        st.rerun(scope="app")


def main() -> None:
    st.set_page_config(
        page_title="Repeat guard · loop hotspots", page_icon="🔁", layout="wide", menu_items={"About": None}
    )
    settings = Settings.from_env()
    db = settings.store
    try:
        bounds = reads.time_bounds(db) if reads.has_data(db) else None
        if bounds is None or int(bounds.iloc[0]["rows"]) == 0:
            st.title("Loop hotspots")
            st.info(CLICKHOUSE_FEED_HELP if settings.clickhouse else FEED_HELP.format(db=shlex.quote(str(db))))
            _wait_for_calls(db)
            return
        filters, auto, kinds = sidebar.draw(db, reads.filter_options(db), bounds)
        if (missing_facts := reads.missing_facts(db)) is not None:  # spans from a guard made with record_facts=False
            st.warning(missing_facts, icon=":material/warning:")
    except (StoreError, sqlite3.Error) as exc:
        view.store_failed(db, exc)
        return
    view.keep(view.View(settings, filters, auto, kinds))
    st.navigation(pages()).run()


if __name__ == "__main__":
    main()

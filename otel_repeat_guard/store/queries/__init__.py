"""Every question the dashboard asks the store, as parameterized SQL returning DataFrames, one module per
part of the page.

Aggregation happens in SQLite; pandas only receives the (small) results. Values always
travel as parameters: the SQL text is built only from fixed fragments and placeholders.

- ``filters``: the sidebar's filters as SQL conditions, the options and time bounds it offers, and the
  helpers the other modules share;
- ``overview``: the headline and the loops over time (read from the roll-up for whole days);
- ``hotspots``: loop hotspots by tool and agent, and the model calls' tokens by agent, model and tool;
- ``reminders``: each reminder's outcome;
- ``variants``: an experiment's reminders by wording variant and model;
- ``runs``: run lengths, the drill-down's runs and an agent run's timeline;
- ``loop_kinds``: cycles, no-progress runs and parallel duplicates;
- ``conversations``: conversations and sessions;
- ``blind_spots``: calls the guard could not compare, and excluded tools.

Every query is importable from here.
"""

from otel_repeat_guard.store.missing_facts import missing_facts
from otel_repeat_guard.store.queries.blind_spots import excluded_tools, undelivered_reminders, unguarded_calls
from otel_repeat_guard.store.queries.conversations import RECENT_MODEL_CALLS, conversation_runs, conversations
from otel_repeat_guard.store.queries.filters import (
    AGENT,
    MODEL_AGENT,
    TIERS,
    Filters,
    Param,
    filter_options,
    time_bounds,
)
from otel_repeat_guard.store.queries.hotspots import (
    has_model_calls,
    hotspots_by_agent,
    hotspots_by_tool,
    model_tokens,
    wasted_tokens,
)
from otel_repeat_guard.store.queries.loop_kinds import agent_cycles, cycle_calls, hotspot_loops, numbered_copies
from otel_repeat_guard.store.queries.overview import BUCKET_WIDTHS_S, bucket_seconds, headline, over_time
from otel_repeat_guard.store.queries.reminders import (
    OUTCOME_TEXT,
    OUTCOMES,
    REMINDER_WINDOW,
    reminder_count,
    reminder_outcomes,
)
from otel_repeat_guard.store.queries.runs import (
    TIMELINE_ROWS,
    chain,
    hotspot_runs,
    loop_start_ns,
    run_lengths,
    run_timeline,
)
from otel_repeat_guard.store.queries.variants import reminder_variants

__all__ = [
    "AGENT",
    "BUCKET_WIDTHS_S",
    "MODEL_AGENT",
    "OUTCOMES",
    "OUTCOME_TEXT",
    "RECENT_MODEL_CALLS",
    "REMINDER_WINDOW",
    "TIERS",
    "TIMELINE_ROWS",
    "Filters",
    "Param",
    "agent_cycles",
    "bucket_seconds",
    "chain",
    "conversation_runs",
    "conversations",
    "cycle_calls",
    "excluded_tools",
    "filter_options",
    "has_model_calls",
    "headline",
    "hotspot_loops",
    "hotspot_runs",
    "hotspots_by_agent",
    "hotspots_by_tool",
    "loop_start_ns",
    "missing_facts",
    "model_tokens",
    "numbered_copies",
    "over_time",
    "reminder_count",
    "reminder_outcomes",
    "reminder_variants",
    "run_lengths",
    "run_timeline",
    "time_bounds",
    "undelivered_reminders",
    "unguarded_calls",
    "wasted_tokens",
]

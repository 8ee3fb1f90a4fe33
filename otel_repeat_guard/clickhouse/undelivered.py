"""The reminders that did not reach the model, out of the exporter's ``otel_traces``: each guard event
``repeat_tool_guard.undelivered`` on a model call's span (``decide/delivery.py``), as the embedded store keeps them
(``undelivered_reminders``). Read from the table itself, rollup or not: a rare event, bounded by the range's scan."""

from __future__ import annotations

from otel_repeat_guard.clickhouse.calls import SERVICE_CONDITION, TABLE
from otel_repeat_guard.clickhouse.guard_logs import LogsTable, joined
from otel_repeat_guard.core.facts import RUN, RUN_NAME
from otel_repeat_guard.decide.delivery import UNDELIVERED_EVENT

UNDELIVERED = f"""
    SELECT
        toUnixTimestamp64Nano(Timestamp) + toInt64(Duration) AS end_ns,
        toValidUTF8(ev['repeat_tool_guard.reason']) AS reason,
        toValidUTF8(ev['repeat_tool_guard.tier']) AS tier,
        toValidUTF8(ev['gen_ai.tool.name']) AS tool_name,
        toValidUTF8(if(SpanAttributes['{RUN_NAME}'] != '', SpanAttributes['{RUN_NAME}'], SpanAttributes['{RUN}'])) AS agent
    FROM {TABLE}
    ARRAY JOIN Events.Name AS ev_name, Events.Attributes AS ev
    WHERE Timestamp >= fromUnixTimestamp64Nano({{scan_lo:Int64}}) AND Timestamp <= fromUnixTimestamp64Nano({{scan_hi:Int64}})
      {{services}}
      AND has(Events.Name, '{UNDELIVERED_EVENT}') AND ev_name = '{UNDELIVERED_EVENT}'
"""
"""One row per undelivered reminder: the model call's times, service and run, the reminder's reason, tier and tool."""


def undelivered_sql(services: bool, logs: LogsTable | None = None) -> str:
    """The rows' SQL, with the services condition when the filters choose services; reading the events from the
    logs table too when there is one (``guard_logs``)."""
    return joined(UNDELIVERED, logs).replace("{services}", SERVICE_CONDITION if services else "")

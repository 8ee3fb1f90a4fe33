"""Runs: one loop's story, call by call, as a picture and as a table."""

from __future__ import annotations

from otel_repeat_guard.dashboard import reads
from otel_repeat_guard.dashboard.sections import drill_down
from otel_repeat_guard.dashboard.view import View, run_page


def draw(view: View) -> None:
    tools = [str(t) for t in reads.hotspots_by_tool(view.store, view.filters)["tool"]]
    drill_down.draw(view.store, view.filters, tools, view.settings, view.kinds)


if __name__ == "__main__":
    run_page(
        "Runs",
        "A hotspot's loops, and the chosen loop's agent run: its model calls and tool calls in order, the "
        "reminders where they were sent and received, and where the loop broke.",
        draw,
    )

"""Overview: the headline figures, what needs attention, and the loops over time."""

from __future__ import annotations

from otel_repeat_guard.dashboard import figures, reads
from otel_repeat_guard.dashboard.sections import attention, overview
from otel_repeat_guard.dashboard.view import View, run_page


def draw(view: View) -> None:
    db, filters, words = view.store, view.filters, view.words
    # Every query first, then the drawing: a store that fails part-way shows one message, not half a page (the
    # chart over time, folded, reads its own when opened).
    headline = reads.headline(db, filters)
    all_tokens, wasted = reads.model_tokens(db, filters), reads.wasted_tokens(db, filters)
    outcomes = reads.reminder_outcomes(db, filters)
    by_tool, by_agent = reads.hotspots_by_tool(db, filters), reads.hotspots_by_agent(db, filters)
    unguarded, excluded = reads.unguarded_calls(db, filters), reads.excluded_tools(db, filters.tools)
    bucket_s = view.bucket_seconds()
    models = not all_tokens.empty
    tokens = figures.token_headline(all_tokens, wasted)
    overview.draw_headline(headline, tokens, outcomes, filters, models, words)
    attention.draw(by_tool, by_agent, outcomes, unguarded, excluded, words)
    overview.draw_over_time(lambda: reads.over_time(db, filters, bucket_s), bucket_s, words)  # read once opened


if __name__ == "__main__":
    run_page(
        "Loop hotspots",
        "Tool calls that LLM agents repeated with identical arguments, as seen by otel-repeat-guard: "
        "what the loops cost, whether the reminders worked, and what happened in each run.",
        draw,
    )

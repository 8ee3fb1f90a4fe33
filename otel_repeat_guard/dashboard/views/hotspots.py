"""Hotspots: the loops by tool, by agent and by model, and how long the runs grew."""

from __future__ import annotations

from otel_repeat_guard.dashboard import figures, reads
from otel_repeat_guard.dashboard.sections import hotspots, overview
from otel_repeat_guard.dashboard.view import View, run_page


def draw(view: View) -> None:
    db, filters, words = view.store, view.filters, view.words
    by_tool, by_agent = reads.hotspots_by_tool(db, filters), reads.hotspots_by_agent(db, filters)
    all_tokens, wasted = reads.model_tokens(db, filters), reads.wasted_tokens(db, filters)
    lengths = reads.run_lengths(db, filters)
    models = not all_tokens.empty
    by_tool = figures.with_wasted_tokens(by_tool, wasted, "tool", "tool", all_tokens)
    by_agent = figures.with_wasted_tokens(by_agent, wasted, "agent", "agent", all_tokens)
    hotspots.draw_grouped("By tool", by_tool, "tool", "hotspots_by_tool", models, words)
    hotspots.draw_grouped("By agent", by_agent, "agent", "hotspots_by_agent", models, words)
    if models:
        hotspots.draw_models(figures.by_model(all_tokens, wasted))
    overview.draw_run_lengths(lengths, words)


if __name__ == "__main__":
    run_page("Hotspots", "Where the loops are: by tool, by agent and by model, with what they cost.", draw)

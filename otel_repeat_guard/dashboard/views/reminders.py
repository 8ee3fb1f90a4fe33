"""Reminders: did they work? Their outcomes by tier, tool, agent or model."""

from __future__ import annotations

from otel_repeat_guard.dashboard import reads
from otel_repeat_guard.dashboard.sections import efficacy, variants
from otel_repeat_guard.dashboard.view import View, run_page


def draw(view: View) -> None:
    db, filters = view.store, view.filters
    outcomes, reminders = reads.reminder_outcomes(db, filters), reads.reminder_count(db, filters)
    efficacy.draw(outcomes, reminders, filters.kind)
    variants.draw(reads.reminder_variants(db, filters), filters.kind)


if __name__ == "__main__":
    run_page(
        "Did the reminders work?",
        "A reminder is heeded when the agent's next call is a different one (broken), ignored when it is the "
        "same call again.",
        draw,
    )

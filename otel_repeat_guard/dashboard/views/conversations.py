"""Conversations and sessions: the agent runs that share one, and a chosen run's calls."""

from __future__ import annotations

from otel_repeat_guard.dashboard import reads
from otel_repeat_guard.dashboard.sections import conversations
from otel_repeat_guard.dashboard.view import View, run_page


def draw(view: View) -> None:
    listed = reads.conversations(view.store, view.filters)
    conversations.draw(view.store, listed, view.filters, view.settings, view.words)


if __name__ == "__main__":
    run_page(
        "Conversations and sessions",
        "The agent runs that share a conversation (`gen_ai.conversation.id`) or a session (`session.id`).",
        draw,
    )

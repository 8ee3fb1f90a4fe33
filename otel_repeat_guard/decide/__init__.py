"""Deciding and recording: the guard (one entry per span kind, each returning a ``Decision``), the
recorder that words it as events, metrics and reminders, and the questions a harness asks."""

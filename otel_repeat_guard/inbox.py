"""The public path of the reminder inbox (docs/distributed.md); it lives in :mod:`otel_repeat_guard.decide.inbox`."""

from otel_repeat_guard.decide.inbox import RedisReminderInbox, ReminderInbox, reminder_inbox

__all__ = ["RedisReminderInbox", "ReminderInbox", "reminder_inbox"]

"""Per-run state shared by processes: the Redis chain store (:mod:`.redis`), which wraps the in-memory
:class:`~otel_repeat_guard.core.chains.ChainTracker` as its fallback, and the connection it and the shared inbox
use (:mod:`.connection`)."""

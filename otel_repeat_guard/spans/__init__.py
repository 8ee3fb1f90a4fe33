"""Reading spans: the SDK internals (``span_events``, the only module that touches them), which agent run a
span belongs to, and what a run's model calls asked for."""

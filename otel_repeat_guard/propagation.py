"""The public path of run propagation (docs/distributed.md); it lives in :mod:`otel_repeat_guard.setup.propagation`."""

from otel_repeat_guard.setup.propagation import RunBaggagePropagator, propagate_run, run_context

__all__ = ["RunBaggagePropagator", "propagate_run", "run_context"]

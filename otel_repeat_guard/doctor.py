"""The public path of ``diagnose`` (docs/operations.md); ``doctor`` lives in :mod:`otel_repeat_guard.cli.doctor`."""

from otel_repeat_guard.cli.doctor import Report, diagnose

__all__ = ["Report", "diagnose"]

"""``configure()``'s logger provider: the guard's log events (:mod:`otel_repeat_guard.decide.log_events`) to the
exporters ``OTEL_LOGS_EXPORTER`` names, beside the trace and metric exporters.

``OTEL_LOGS_EXPORTER`` is read as ``OTEL_TRACES_EXPORTER`` is: a comma-separated list of the
``opentelemetry_logs_exporter`` entry points exporter packages register, ``otlp`` by default (over
``OTEL_EXPORTER_OTLP_LOGS_PROTOCOL``, else ``OTEL_EXPORTER_OTLP_PROTOCOL``, else ``http/protobuf``), ``none`` for
none. The OTLP exporter reads its own endpoint (``OTEL_EXPORTER_OTLP_LOGS_ENDPOINT``, else
``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/logs``), headers and timeout. No exporter, or ``log_events`` off: no
provider, and the guard makes no log record.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from opentelemetry import _logs
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource

from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.decide.log_events import is_real
from otel_repeat_guard.setup.environment import OTLP_ENTRY_POINTS, signal_exporter_names

LOGS_EXPORTER = "OTEL_LOGS_EXPORTER"
_GROUP = "opentelemetry_logs_exporter"


def log_exporter_names(environ: Mapping[str, str], default: str = "otlp") -> list[str]:
    """The entry-point names ``OTEL_LOGS_EXPORTER`` asks for, ``default`` when unset (ValueError naming the
    variable for a bad value)."""
    return signal_exporter_names("LOGS", environ, default)


def _exporter_classes(environ: Mapping[str, str], default: str) -> list[type[Any]]:
    """The log exporter classes ``OTEL_LOGS_EXPORTER`` names, from their entry points."""
    names = log_exporter_names(environ, default)
    found = {point.name: point for point in entry_points(group=_GROUP)}
    classes = []
    for name in names:
        point = found.get(name)
        if point is None:
            if name in OTLP_ENTRY_POINTS.values():
                package = "opentelemetry-exporter-otlp-proto-grpc" if "grpc" in name else "otel-repeat-guard[otlp]"
                raise ValueError(f"the OTLP log exporter is not installed ({name}): pip install '{package}'")
            raise ValueError(
                f"{LOGS_EXPORTER} names {name!r}, which no installed package provides as an {_GROUP} entry point "
                f"(installed: {', '.join(sorted(found)) or 'none'})"
            )
        try:
            classes.append(point.load())
        except ImportError as error:
            raise ValueError(f"the {name} log exporter cannot be imported: {error}") from None
    return classes


def logger_provider(
    config: GuardConfig, resource: Resource, environ: Mapping[str, str], *, default: str = "otlp"
) -> LoggerProvider | None:
    """A logger provider with a batch processor per exporter ``OTEL_LOGS_EXPORTER`` asks for (``default`` when it
    is unset: ``configure()`` passes ``none`` when the span exporters are given in code); None with none, or
    with ``config.log_events`` off. Its exit hook is off: ``configure()``'s bounded shutdown ends it."""
    if not config.log_events:
        return None  # with span exporters given in code (``default`` none), only OTEL_LOGS_EXPORTER asks for one
    classes = _exporter_classes(environ, default)
    if not classes:
        return None
    provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
    for cls in classes:
        provider.add_log_record_processor(BatchLogRecordProcessor(cls()))
    return provider


def made_global(provider: LoggerProvider | None) -> None:
    """``configure(set_global=True)``: ``provider`` becomes the global one, unless a real one is set already."""
    if provider is not None and not is_real(_logs.get_logger_provider()):
        _logs.set_logger_provider(provider)

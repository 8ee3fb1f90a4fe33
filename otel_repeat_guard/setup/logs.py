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

from collections.abc import Mapping, Sequence
from importlib.metadata import entry_points
from typing import Any

from opentelemetry import _logs
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource

from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.decide.log_events import is_real
from otel_repeat_guard.setup.bounded import Tally, destination
from otel_repeat_guard.setup.environment import OTLP_ENTRY_POINTS, signal_exporter_names

try:  # the SDK's name from 1.41 on; the older one (deprecated since) before
    from opentelemetry.sdk._logs.export import LogRecordExporter as _Exporter
except ImportError:  # pragma: no cover - opentelemetry-sdk 1.40
    from opentelemetry.sdk._logs.export import LogExporter as _Exporter

LOGS_EXPORTER = "OTEL_LOGS_EXPORTER"
_GROUP = "opentelemetry_logs_exporter"


def log_exporter_names(environ: Mapping[str, str], default: str = "otlp") -> list[str]:
    """The entry-point names ``OTEL_LOGS_EXPORTER`` asks for, ``default`` when unset (ValueError naming the
    variable for a bad value)."""
    return signal_exporter_names("LOGS", environ, default)


class CountedLogExporter(_Exporter):
    """A log exporter that counts the records it confirmed sent (``configure()``'s one "did not send" line)."""

    def __init__(self, exporter: _Exporter, tally: Tally) -> None:
        self._exporter = exporter
        self.tally = tally

    def export(self, batch: Sequence[Any]) -> Any:
        result = self._exporter.export(batch)
        if getattr(result, "name", None) == "SUCCESS":  # the SDK has had two result enums of this name
            self.tally.add(sent=len(batch))
        return result

    def shutdown(self) -> None:
        self._exporter.shutdown()  # type: ignore[no-untyped-call]

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self._exporter.force_flush(timeout_millis))


class CountedBatchLogRecordProcessor(BatchLogRecordProcessor):
    """The SDK's batch processor, counting the records it is handed (those its full queue drops included)."""

    def __init__(self, exporter: CountedLogExporter) -> None:
        super().__init__(exporter)
        self.tally = exporter.tally

    def on_emit(self, *args: Any, **kwargs: Any) -> None:
        self.tally.add(handed=1)
        super().on_emit(*args, **kwargs)


def _exporter_classes(environ: Mapping[str, str], default: str) -> list[tuple[type[Any], str]]:
    """The log exporter classes ``OTEL_LOGS_EXPORTER`` names, from their entry points, with their names."""
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
            classes.append((point.load(), name))
        except ImportError as error:
            raise ValueError(f"the {name} log exporter cannot be imported: {error}") from None
    return classes


def logger_provider(
    config: GuardConfig,
    resource: Resource,
    environ: Mapping[str, str],
    *,
    default: str = "otlp",
    tallies: list[Tally] | None = None,
) -> LoggerProvider | None:
    """A logger provider with a batch processor per exporter ``OTEL_LOGS_EXPORTER`` asks for (``default`` when it
    is unset: ``configure()`` passes ``none`` when the span exporters are given in code); None with none, or
    with ``config.log_events`` off. Its exit hook is off: ``configure()``'s bounded shutdown ends it. Each
    exporter's records handed and sent are counted in a :class:`Tally` appended to ``tallies``, if given."""
    if not config.log_events:
        return None  # with span exporters given in code (``default`` none), only OTEL_LOGS_EXPORTER asks for one
    classes = _exporter_classes(environ, default)
    if not classes:
        return None
    provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
    for cls, name in classes:
        if tallies is None:
            provider.add_log_record_processor(BatchLogRecordProcessor(cls()))
            continue
        tallies.append(Tally("log record", destination("LOGS", name, environ)))
        provider.add_log_record_processor(CountedBatchLogRecordProcessor(CountedLogExporter(cls(), tallies[-1])))
    return provider


def made_global(provider: LoggerProvider | None) -> None:
    """``configure(set_global=True)``: ``provider`` becomes the global one, unless a real one is set already."""
    if provider is not None and not is_real(_logs.get_logger_provider()):
        _logs.set_logger_provider(provider)

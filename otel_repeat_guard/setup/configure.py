"""``configure()``: a tracer and a meter provider with the guard and OTLP exporters, in one call.

A convenience for programs that do not own their providers yet. It follows the standard
SDK environment variables, so one build runs unchanged against any OTel backend:

- ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``_TRACES_ENDPOINT`` / ``_METRICS_ENDPOINT``, ``_HEADERS``,
  ``_TIMEOUT``, ``_COMPRESSION``, certificates: read by the OTLP exporters themselves;
- ``OTEL_EXPORTER_OTLP_PROTOCOL`` (and the per-signal ``_TRACES_PROTOCOL`` /
  ``_METRICS_PROTOCOL``): ``http/protobuf`` (the default) or ``grpc``;
- ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER`` / ``OTEL_LOGS_EXPORTER`` (``setup/logs.py``): a list
  (``otlp`` by default, ``none`` for none) of names, resolved exactly as the SDK's own configurator does: through the
  ``opentelemetry_traces_exporter`` / ``opentelemetry_metrics_exporter`` entry points that exporter
  packages register (``otlp``, ``console``, ``prometheus`` from ``opentelemetry-exporter-prometheus``,
  ``zipkin``, ...). ``otlp`` follows the protocol variables below;
- ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``: they override the
  ``service_name`` and ``resource_attributes`` given in code, so a deployment can rename
  a service without a rebuild;
- ``OTEL_METRIC_EXPORT_INTERVAL``: read by the periodic metric reader;
- ``OTEL_REPEAT_GUARD_*``: the guard's own configuration, when ``config`` is not given;
  ``OTEL_REPEAT_GUARD_SHUTDOWN_TIMEOUT_S``: how long ``shutdown()``, ``force_flush()`` and the exit wait at most
  (5 s by default; :mod:`otel_repeat_guard.setup.bounded`).

A wrong value of any of these, or of the other SDK variables configure() meets (``OTEL_BSP_*``,
``OTEL_METRIC_EXPORT_TIMEOUT``, compression, sampler, exemplar filter, temporality, resource detectors), is a
``ValueError`` naming the variable and its value (:func:`check_environment`), before anything is built.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, OTELResourceDetector, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.util.types import AttributeValue

from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.decide.inbox import ReminderInbox
from otel_repeat_guard.inputs import checked_config, checked_flag, checked_sequence, flush_timeout
from otel_repeat_guard.installed import default_inbox, set_installed_guard
from otel_repeat_guard.processor import ReminderCallback, RepeatGuardSpanProcessor
from otel_repeat_guard.setup.bounded import (
    CountedBatchSpanProcessor,
    CountedSpanExporter,
    Ending,
    EndingMeterProvider,
    Tally,
    counted_metric_exporter,
    destination,
    shutdown_timeout,
)
from otel_repeat_guard.setup.environment import OTLP_ENTRY_POINTS, check_environment, signal_exporter_names
from otel_repeat_guard.setup.logs import logger_provider, made_global

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk.metrics.export import MetricExporter

logger = logging.getLogger("otel_repeat_guard")
_global_lock = threading.Lock()
_global: list[GuardTelemetry] = []  # what configure(set_global=True) built: OTel keeps the first globals


def _after_fork() -> None:
    """In a forked child: a fresh lock (a thread of the parent's may have held this one)."""
    global _global_lock  # noqa: PLW0603 - the module's own lock, renewed
    _global_lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_after_fork)


@dataclass(frozen=True)
class GuardTelemetry:
    """What ``configure()`` built. ``inbox`` is None when you passed your own ``on_reminder``."""

    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    guard: RepeatGuardSpanProcessor
    inbox: ReminderInbox | None
    _ending: Ending = field(default_factory=Ending, repr=False, compare=False)
    logger_provider: LoggerProvider | None = None  # the guard's log events' (setup/logs.py); None: none

    def force_flush(self, timeout_millis: float | None = None) -> bool:
        """Flush both providers, waiting at most ``timeout_millis`` (an int or a float, as the SDK takes it;
        None: the shutdown bound, 5 s by default; anything else: 30 s). False when something did not finish in
        time (said in one line, with what is not sent yet) or a processor's flush failed."""
        millis = round(self._ending.timeout_s * 1000) if timeout_millis is None else flush_timeout(timeout_millis)
        return self._ending.force_flush(self.tracer_provider, self.meter_provider, millis)

    def shutdown(self) -> None:
        """Flush and stop both providers, within the shutdown bound (5 s by default,
        ``OTEL_REPEAT_GUARD_SHUTDOWN_TIMEOUT_S``); what was not sent is said in one line. The process's exit
        does this too; a second call does nothing."""
        atexit.unregister(self.shutdown)
        self._ending.shutdown(self.tracer_provider, self.meter_provider)


_SIGNALS = {
    "TRACES": ("OTEL_TRACES_EXPORTER", "opentelemetry_traces_exporter"),
    "METRICS": ("OTEL_METRICS_EXPORTER", "opentelemetry_metrics_exporter"),
}


def exporter_names(signal: str, environ: Mapping[str, str] | None = None) -> list[str]:
    """The entry-point names ``OTEL_<signal>_EXPORTER`` asks for: a comma-separated list, ``otlp`` by default
    (over ``http/protobuf`` unless the protocol variables say ``grpc``), ``none`` for none."""
    return signal_exporter_names(signal, os.environ if environ is None else environ)


def _exporter_classes(signal: str, environ: Mapping[str, str]) -> list[type[Any]]:
    """The exporter (or, for metrics, reader) classes named by ``OTEL_<signal>_EXPORTER``, loaded through the
    SDK configurator's own entry-point lookup."""
    from opentelemetry.sdk._configuration import _import_exporters  # noqa: PLC0415 - the SDK configurator's lookup

    variable, group = _SIGNALS[signal]
    names = exporter_names(signal, environ)
    try:
        traces, metrics_, _ = _import_exporters(
            names if signal == "TRACES" else [], names if signal == "METRICS" else [], []
        )
    except RuntimeError as exc:  # a name no installed package registers
        name = next((n for n in names if f"'{n}'" in str(exc)), "")
        if name in OTLP_ENTRY_POINTS.values():
            protocol = next(p for p, n in OTLP_ENTRY_POINTS.items() if n == name)
            raise _missing_extra(ModuleNotFoundError(name=name), protocol) from None
        raise ValueError(
            f"{variable} names {name or names!r}, which no installed package provides as an {group} entry point "
            f"(installed: {', '.join(_installed(group)) or 'none'})"
        ) from None
    except ImportError as exc:  # the package is there but cannot be imported
        protocol = "grpc" if "grpc" in str(exc.name or exc) else "http/protobuf"
        raise _missing_extra(exc, protocol) from None
    found: dict[str, type[Any]] = dict(traces if signal == "TRACES" else metrics_)
    return [found[name] for name in names]


def _installed(group: str) -> list[str]:
    return sorted({entry.name for entry in entry_points(group=group)})


def span_exporters(environ: Mapping[str, str] | None = None) -> list[SpanExporter]:
    """The span exporters ``OTEL_TRACES_EXPORTER`` asks for (each reads its own settings from the environment)."""
    return [exporter for exporter, _ in _named_span_exporters(os.environ if environ is None else environ)]


def _named_span_exporters(environ: Mapping[str, str]) -> list[tuple[SpanExporter, str]]:
    """The span exporters ``OTEL_TRACES_EXPORTER`` asks for, each with where it sends."""
    classes = zip(_exporter_classes("TRACES", environ), exporter_names("TRACES", environ), strict=True)
    return [(cls(), destination("TRACES", name, environ)) for cls, name in classes]


def metric_readers(
    environ: Mapping[str, str] | None = None, *, export_interval_millis: float | None = None
) -> list[MetricReader]:
    """The metric readers ``OTEL_METRICS_EXPORTER`` asks for: pull readers (``prometheus``) as they are, push
    exporters behind a periodic reader (``OTEL_METRIC_EXPORT_INTERVAL``, unless ``export_interval_millis``)."""
    return _metric_readers(os.environ if environ is None else environ, export_interval_millis, None)


def _metric_readers(
    environ: Mapping[str, str], export_interval_millis: float | None, tallies: list[Tally] | None
) -> list[MetricReader]:
    """:func:`metric_readers`; with ``tallies``, each push exporter counts its metric points in a tally added there."""
    readers: list[MetricReader] = []
    try:
        for cls, name in zip(_exporter_classes("METRICS", environ), exporter_names("METRICS", environ), strict=True):
            if issubclass(cls, MetricReader):
                readers.append(cls())
                continue
            if tallies is None:
                exporter: MetricExporter = cls()
            else:
                tallies.append(Tally("metric point", destination("METRICS", name, environ)))
                exporter = counted_metric_exporter(cls, tallies[-1])
            readers.append(PeriodicExportingMetricReader(exporter, export_interval_millis=export_interval_millis))
    except BaseException:
        for reader in readers:  # their threads would outlive the error
            reader.shutdown()
        raise
    return readers


def _missing_extra(exc: ImportError, protocol: str) -> ValueError:
    package = "opentelemetry-exporter-otlp-proto-grpc" if protocol == "grpc" else "otel-repeat-guard[otlp]"
    return ValueError(f"the OTLP {protocol} exporter is not installed ({exc.name}): pip install '{package}'")


def build_resource(service_name: str | None, attributes: Mapping[str, AttributeValue] | None) -> Resource:
    """The SDK's default resource, then the code's attributes, then ``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_SERVICE_NAME``."""
    code: dict[str, AttributeValue] = dict(attributes or {})
    if service_name is not None:
        code[SERVICE_NAME] = service_name
    return Resource.create(code).merge(OTELResourceDetector().detect())


def _store_exporter(store: str | Path | bool, config: GuardConfig, store_arguments: bool) -> SpanExporter:
    from otel_repeat_guard.store import SQLiteSpanExporter  # noqa: PLC0415 - only programs that keep a store
    from otel_repeat_guard.store.schema import StoreError  # noqa: PLC0415 - as above

    path = None if store is True else Path(str(store))
    try:
        exporter: SpanExporter = SQLiteSpanExporter(path, config=config, store_arguments=store_arguments)
    except StoreError as error:  # a missing folder, a directory, a file of another program: bad input
        raise ValueError(f"store cannot be used: {error}") from error
    return exporter


def configure(  # noqa: PLR0913 - the public entry point: keyword options
    config: GuardConfig | None = None,
    *,
    on_reminder: ReminderCallback | None = None,
    service_name: str | None = None,
    resource_attributes: Mapping[str, AttributeValue] | None = None,
    span_exporters: Sequence[SpanExporter] | None = None,
    metric_readers: Sequence[MetricReader] | None = None,
    store: str | Path | bool = False,
    store_arguments: bool = True,
    set_global: bool = True,
    shutdown_timeout_s: float | None = None,
) -> GuardTelemetry:
    """Build providers with the guard and exporters; by default make them global.

    - ``config``: the guard's configuration; default ``GuardConfig.from_env()``.
    - ``on_reminder``: the harness callback; default the process-wide
      :func:`~otel_repeat_guard.installed.default_inbox`, returned as ``.inbox``.
    - ``span_exporters`` / ``metric_readers``: replace the ones the environment asks for
      (OTLP by default); pass ``[]`` for none.
    - ``store``: also write tool calls to the SQLite store the dashboard reads: ``True``
      for the default path (``$OTEL_REPEAT_GUARD_DB`` or ``./repeat-guard.db``), or a path.
      ``store_arguments=False`` keeps argument text out of it.
    - ``set_global``: set the global tracer and meter providers and make this guard the
      process-wide one (what framework adapters use when not given a guard).
    - ``shutdown_timeout_s``: how long ``shutdown()`` (and the process's exit, which calls it) and
      ``force_flush()`` wait at most for the exporters, in seconds; default ``OTEL_REPEAT_GUARD_SHUTDOWN_TIMEOUT_S``,
      else 5. What is not sent by then is dropped and said in one line.

    OpenTelemetry sets its global providers once. So with ``set_global``, a second call (a re-run
    notebook cell, a library and the application both calling it) returns what the first built,
    with a warning, so the installed guard is always the one on the provider that receives the
    spans; and when some other code set the global tracer provider first, it raises
    ``ValueError``: a guard on a provider that receives no spans would never see a call.
    """
    options = _Options(
        config,
        on_reminder,
        service_name,
        resource_attributes,
        span_exporters,
        metric_readers,
        store,
        store_arguments,
        shutdown_timeout_s,
    )
    if checked_flag("set_global", set_global):  # "no" is a text, and bool("no") would install globals
        with _global_lock:
            if _global:
                logger.warning(
                    "configure() was called before in this process; returning what that call built "
                    "(OpenTelemetry keeps the first global providers). Pass set_global=False for providers of your own."
                )
                return _global[0]
            current = trace.get_tracer_provider()
            if isinstance(current, TracerProvider):
                raise ValueError(
                    "a global tracer provider is already set, so configure() cannot install one: add "
                    "RepeatGuardSpanProcessor to that provider (provider.add_span_processor(guard)), "
                    "or call configure(set_global=False)"
                )
            telemetry = _build(options)
            trace.set_tracer_provider(telemetry.tracer_provider)
            metrics.set_meter_provider(telemetry.meter_provider)
            made_global(telemetry.logger_provider)
            set_installed_guard(telemetry.guard)
            _global.append(telemetry)
            return telemetry
    return _build(options)


class _Options(NamedTuple):
    """configure()'s options, as the application gave them."""

    config: GuardConfig | None
    on_reminder: ReminderCallback | None
    service_name: str | None
    resource_attributes: Mapping[str, AttributeValue] | None
    span_exporters: Sequence[SpanExporter] | None
    metric_readers: Sequence[MetricReader] | None
    store: str | Path | bool
    store_arguments: bool
    shutdown_timeout_s: float | None


def _check_options(
    options: _Options,
) -> tuple[tuple[SpanExporter, ...] | None, tuple[MetricReader, ...] | None]:
    """configure()'s options that would otherwise fail deep in the SDK (an exporter is shut down at exit, far
    from its cause) or be read as something else: a ValueError naming the one that is wrong. The exporters and
    readers, as tuples."""
    config, _, service_name, resource_attributes, span_exporters, metric_readers, store, store_arguments, _ = options
    if config is not None:  # before the log exporter reads it
        checked_config(config)
    if service_name is not None and not (isinstance(service_name, str) and service_name):
        raise ValueError(f"service_name must be a non-empty string or None, got {service_name!r}")
    checked_flag("store_arguments", store_arguments)
    if resource_attributes is not None and not isinstance(resource_attributes, Mapping):
        raise ValueError(f"resource_attributes must be a mapping or None, got {resource_attributes!r}")
    exporters = None
    if span_exporters is not None:
        exporters = checked_sequence("span_exporters", span_exporters, ("export", "shutdown"), "span exporters")
    readers = None
    if metric_readers is not None:
        readers = checked_sequence("metric_readers", metric_readers, ("collect", "shutdown"), "metric readers")
    if not isinstance(store, (bool, str, Path)) or store == "" or "\0" in str(store):  # NUL: no file has one
        raise ValueError(f"store must be True, False or a path, got {store!r}")
    return exporters, readers


def _build(options: _Options) -> GuardTelemetry:
    environ = os.environ
    span_exporters, metric_readers = _check_options(options)
    config, on_reminder, service_name, resource_attributes, _, _, store, store_arguments, timeout_s = options
    check_environment(environ)
    timeout_s = shutdown_timeout(timeout_s, environ)
    config = GuardConfig.from_env(environ) if config is None else config
    resource = build_resource(service_name, resource_attributes)
    if span_exporters is None:
        exporters = _named_span_exporters(environ)
    else:
        exporters = [(exporter, type(exporter).__name__) for exporter in span_exporters]
    if store is not False:
        exporters.append((_store_exporter(store, config, store_arguments), "the store"))
    log_tallies: list[Tally] = []  # each log exporter's records, for the "did not send" line
    logs = logger_provider(
        config, resource, environ, default="otlp" if span_exporters is None else "none", tallies=log_tallies
    )
    # last: a periodic reader starts its thread when made, and one left behind by a later ValueError
    # would warn "Cannot call collect" every interval for the rest of the process
    tallies: list[Tally] = []
    readers = list(_metric_readers(environ, None, tallies) if metric_readers is None else metric_readers)

    # the SDK's exit hooks wait up to 30 s per batch processor: the telemetry's own shutdown, bounded, instead
    meter_provider = EndingMeterProvider(metric_readers=readers, resource=resource, shutdown_on_exit=False)
    inbox = default_inbox() if on_reminder is None else None
    on_reminder = inbox.put if inbox is not None else on_reminder
    guard = RepeatGuardSpanProcessor(
        config, on_reminder, meter_provider=meter_provider, record_facts=True, logger_provider=logs
    )
    tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    tracer_provider.add_span_processor(guard)  # first, so its events are on the span before any export
    processors = [CountedBatchSpanProcessor(CountedSpanExporter(e, Tally("span", to))) for e, to in exporters]
    for processor in processors:
        tracer_provider.add_span_processor(processor)
    ending = Ending(timeout_s, processors, [*tallies, *log_tallies], logger_provider=logs)
    telemetry = GuardTelemetry(tracer_provider, meter_provider, guard, inbox, ending, logger_provider=logs)
    atexit.register(telemetry.shutdown)
    return telemetry

"""``configure()``'s shutdown and flush, bounded: they return within ``shutdown_timeout_s`` whatever the
endpoints do, and what was not sent is counted and said in one line.

The SDK bounds some of it and not the rest (opentelemetry-sdk 1.40 to 1.45): ``MeterProvider.shutdown`` takes
a timeout and honours it, and an OTLP exporter's ``shutdown()`` ends its retries; but ``BatchSpanProcessor``
shuts down with a fixed 30 s wait (``OTEL_BSP_EXPORT_TIMEOUT`` is read and unused) and its ``force_flush``
ignores its timeout. So each provider's and each batch processor's shutdown (or flush) runs in a daemon
thread, all at once (a silent collector must not hold a local store's spans back), and the caller waits at
most the bound; past it, the span exporters are shut down, which ends their retries and drops what is queued.
The SDK's own exit hooks are off (``shutdown_on_exit=False``): ``configure()`` registers this shutdown instead.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from otel_repeat_guard.core.urls import safe_url

logger = logging.getLogger("otel_repeat_guard")

SHUTDOWN_TIMEOUT_ENV = "OTEL_REPEAT_GUARD_SHUTDOWN_TIMEOUT_S"
DEFAULT_SHUTDOWN_TIMEOUT_S = 5.0
MAX_SHUTDOWN_TIMEOUT_S = 3600.0
_DECIMAL = re.compile(r"[0-9]+(\.[0-9]*)?|\.[0-9]+")


def shutdown_timeout(value: object, environ: Mapping[str, str]) -> float:
    """The bound in seconds: ``value`` (configure()'s ``shutdown_timeout_s``), else the environment's, else 5 s.
    A ValueError naming the option or the variable, and the value, unless it is a number above 0 and at most
    an hour (in the environment: plain decimal digits)."""
    if value is None:
        raw = environ.get(SHUTDOWN_TIMEOUT_ENV, "").strip()
        if not raw:
            return DEFAULT_SHUTDOWN_TIMEOUT_S
        if _DECIMAL.fullmatch(raw) is None or not 0 < float(raw) <= MAX_SHUTDOWN_TIMEOUT_S:
            raise ValueError(
                f"{SHUTDOWN_TIMEOUT_ENV} must be a number of seconds above 0 and at most {MAX_SHUTDOWN_TIMEOUT_S:g}"
                f" (plain decimal digits), got {raw!r}"
            )
        return float(raw)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_SHUTDOWN_TIMEOUT_S:
        raise ValueError(
            f"shutdown_timeout_s must be a number of seconds above 0 and at most {MAX_SHUTDOWN_TIMEOUT_S:g}, "
            f"got {value!r}"
        )
    return float(value)  # NaN and infinity fail the comparison above


def destination(signal: str, name: str, environ: Mapping[str, str]) -> str:
    """Where the exporter of entry-point ``name`` sends ``signal`` (``TRACES`` or ``METRICS``), as the OTLP
    exporters resolve it, through ``safe_url``; for another exporter, its name."""
    if name not in ("otlp_proto_http", "otlp_proto_grpc"):
        return f"the {name} exporter"
    endpoint = environ.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT", "").strip()
    if not endpoint:
        base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        if name == "otlp_proto_grpc":
            endpoint = base or "http://localhost:4317"
        else:
            endpoint = f"{(base or 'http://localhost:4318').removesuffix('/')}/v1/{signal.lower()}"
    return safe_url(endpoint)


@dataclass
class Tally:
    """What one exporter was handed (spans or metric points) and what it confirmed sent."""

    what: str
    """``span`` or ``metric point``."""
    destination: str
    """Where the exporter sends to (an endpoint through ``safe_url``, or what the exporter is)."""
    handed: int = 0
    sent: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, handed: int = 0, sent: int = 0) -> None:
        with self.lock:
            self.handed += handed
            self.sent += sent


class CountedSpanExporter(SpanExporter):
    """An exporter that counts what it sends, and, once ``shutdown``, refuses at once what it is still handed
    (a batch processor past the bound drops it, counted)."""

    def __init__(self, exporter: SpanExporter, tally: Tally) -> None:
        self._exporter = exporter
        self.tally = tally
        self._closed = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._closed.is_set():
            return SpanExportResult.FAILURE
        result = self._exporter.export(spans)
        if result is SpanExportResult.SUCCESS:
            self.tally.add(sent=len(spans))
        return result

    def shutdown(self) -> None:
        with self.tally.lock:  # once: the SDK warns of a second shutdown, and the batch processor calls one
            if self._closed.is_set():
                return
            self._closed.set()
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self._exporter.force_flush(timeout_millis))


class CountedBatchSpanProcessor(BatchSpanProcessor):
    """The SDK's batch processor, counting the spans it is handed."""

    def __init__(self, exporter: CountedSpanExporter) -> None:
        super().__init__(exporter)
        self.exporter = exporter

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is not None and span.context.trace_flags.sampled:
            self.exporter.tally.add(handed=1)
        super().on_end(span)


def counted_metric_exporter(cls: type[MetricExporter], tally: Tally) -> MetricExporter:
    """An instance of the exporter class ``cls`` whose exports count their metric points. A subclass, not a
    wrapper: the periodic reader takes its preferred temporality and aggregation from the exporter itself."""

    def export(self: MetricExporter, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> Any:
        points = sum(
            len(metric.data.data_points)
            for resource in metrics_data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
        )
        tally.add(handed=points)
        result = cls.export(self, metrics_data, timeout_millis, **kwargs)
        if result is MetricExportResult.SUCCESS:
            tally.add(sent=points)
        return result

    exporter: MetricExporter = type(cls.__name__, (cls,), {"export": export})()
    return exporter


class EndingMeterProvider(MeterProvider):
    """The SDK's meter provider, knowing whether it was shut down: the SDK warns of a second shutdown, which the
    exit would make after an application's own ``telemetry.meter_provider.shutdown()``."""

    ended = False

    def shutdown(self, timeout_millis: float = 30_000) -> None:
        self.ended = True
        super().shutdown(timeout_millis)


@dataclass
class Ending:
    """configure()'s bound, the batch processors it added and what their exporters and its metric exporters
    counted: its shutdown and flush, each within the bound."""

    timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S
    processors: list[CountedBatchSpanProcessor] = field(default_factory=list)
    metric_tallies: list[Tally] = field(default_factory=list)
    ended: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    logger_provider: Any = None
    """The guard's log events' provider (``setup/logs.py``), shut down and flushed with the others."""

    def shutdown(self, tracer_provider: TracerProvider, meter_provider: MeterProvider) -> None:
        """Shut both providers down within the bound (once; a second call does nothing)."""
        with self.lock:
            if self.ended:
                return
            self.ended = True
        millis = self.timeout_s * 1000
        calls: list[Callable[[], object]] = [tracer_provider.shutdown, *(p.shutdown for p in self.processors)]
        if not (isinstance(meter_provider, EndingMeterProvider) and meter_provider.ended):
            calls.append(functools.partial(meter_provider.shutdown, timeout_millis=millis))
        if self.logger_provider is not None:
            calls.append(self.logger_provider.shutdown)
        unfinished = _all_within(self.timeout_s, calls)
        if unfinished:  # ends the exporters' retries; what their processors still hold is dropped, counted
            _all_within(0.0, [processor.exporter.shutdown for processor in self.processors])  # none may block
        self._say("shutdown", bool(unfinished))

    def force_flush(self, tracer_provider: TracerProvider, meter_provider: MeterProvider, millis: int) -> bool:
        """Flush both providers, waiting at most ``millis``; whether all finished, every span processor's
        flush true."""
        calls: list[Callable[[], object]] = [
            lambda: tracer_provider.force_flush(millis),
            *(functools.partial(p.force_flush, millis) for p in self.processors),
            lambda: meter_provider.force_flush(millis),
        ]
        if self.logger_provider is not None:
            calls.append(functools.partial(self.logger_provider.force_flush, millis))
        results: list[object] = []
        unfinished = _all_within(millis / 1000, calls, results)
        if unfinished:
            self._say("force_flush", True, millis / 1000)
        return not unfinished and all(result is not False for result in results)

    def _say(self, call: str, late: bool, seconds: float | None = None) -> None:
        """The one line: what was not sent, where to, and the setting that raises the bound."""
        tallies = [p.exporter.tally for p in self.processors] + self.metric_tallies
        missing = [(t, t.handed - t.sent) for t in tallies if t.handed > t.sent]
        if not missing:
            return
        what = " and ".join(
            f"{count:,} of {t.handed:,} {t.what}{'s' if t.handed != 1 else ''} to {t.destination}"
            for t, count in missing
        )
        if call == "shutdown":
            bound = f"{SHUTDOWN_TIMEOUT_ENV} or configure(shutdown_timeout_s=...) raises it"
        else:
            bound = "force_flush(timeout_millis=...) sets it"
        seconds = self.timeout_s if seconds is None else seconds
        if late:
            why = f"still unsent at its bound, {seconds:g} s"
        else:
            why = f"lost before its bound, {seconds:g} s: a full queue, a refusing endpoint or an exporter giving up"
        logger.warning("otel-repeat-guard: %s did not send %s (%s; %s)", call, what, why, bound)


def _all_within(seconds: float, calls: Sequence[Callable[[], object]], results: list[object] | None = None) -> int:
    """Run ``calls`` at once, each in a daemon thread, waiting at most ``seconds`` for all; how many had not
    finished. Their results go to ``results``; one that raises is logged. Where no thread can start (Python
    3.12.0 and 3.12.1 refuse one in an exit hook), they run here, one after the other."""
    deadline = time.monotonic() + seconds
    threads = []
    for call in calls:
        thread = threading.Thread(target=_run, args=(call, results), name="otel-repeat-guard-ending", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # can't create new thread at interpreter shutdown
            _run(call, results)
            continue
        threads.append(thread)
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return sum(thread.is_alive() for thread in threads)


def _run(call: Callable[[], object], results: list[object] | None) -> None:
    try:
        result = call()
    except Exception as error:  # the SDK's meter provider raises what its readers raised
        logger.warning("otel-repeat-guard: %s", str(error).splitlines()[0] if str(error) else type(error).__name__)
        result = False
    if results is not None:
        results.append(result)

"""The OpenTelemetry variables ``configure()`` reads, checked before anything is built, and the exporters they name.

:func:`check_environment` refuses, naming the variable, a value the SDK would refuse naming none, with a traceback,
or silently read as something else. :func:`signal_exporter_names` reads ``OTEL_<SIGNAL>_EXPORTER`` for traces,
metrics and logs alike, ``otlp`` following the protocol variables (:func:`otlp_protocol`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from importlib.metadata import entry_points

from otel_repeat_guard.core.urls import safe_url
from otel_repeat_guard.setup.bounded import shutdown_timeout

PROTOCOLS = ("http/protobuf", "grpc")
OTLP_ENTRY_POINTS = {"http/protobuf": "otlp_proto_http", "grpc": "otlp_proto_grpc"}
"""The entry-point name of the OTLP exporter for each protocol (the same for every signal)."""
_POSITIVE_NUMBERS = (
    "OTEL_METRIC_EXPORT_INTERVAL",
    "OTEL_METRIC_EXPORT_TIMEOUT",
    *(f"OTEL_EXPORTER_OTLP{signal}_TIMEOUT" for signal in ("", "_TRACES", "_METRICS")),
)
"""Milliseconds (seconds for the exporters' timeouts): the SDK refuses some naming no variable, reads others as
their default with a warning, and passes a negative timeout on."""
_WHOLE_NUMBERS = {  # the batch span processor's: int() of a text that is none is a traceback deep in the SDK
    "OTEL_BSP_SCHEDULE_DELAY": 1,
    "OTEL_BSP_MAX_QUEUE_SIZE": 1,
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": 1,
    "OTEL_BSP_EXPORT_TIMEOUT": 0,
}
_MOST = 2**31 - 1  # past it, the SDK's queue and timers overflow (OverflowError)
_CHOICES = {
    "OTEL_METRICS_EXEMPLAR_FILTER": ("always_on", "always_off", "trace_based"),
    "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": ("cumulative", "delta", "lowmemory"),
    "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION": (
        "explicit_bucket_histogram",
        "base2_exponential_bucket_histogram",
    ),
    **{
        f"OTEL_EXPORTER_OTLP{signal}_COMPRESSION": ("gzip", "deflate", "none") for signal in ("", "_TRACES", "_METRICS")
    },
}
_ENTRY_POINT_NAMES = {
    "OTEL_TRACES_SAMPLER": "opentelemetry_traces_sampler",
    "OTEL_EXPERIMENTAL_RESOURCE_DETECTORS": "opentelemetry_resource_detector",
}
_RATIO_SAMPLERS = ("traceidratio", "parentbased_traceidratio")


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Refuse, with a ValueError naming the variable and its value, an OpenTelemetry variable that configure()
    reads (itself or through the SDK) and that the SDK would refuse naming no variable, with a traceback, or
    silently read as something else. A header variable's value is never quoted (it holds credentials), an
    endpoint's only through ``safe_url``."""
    environ = os.environ if environ is None else environ
    for variable in _POSITIVE_NUMBERS:
        if (raw := env_value(variable, environ)) is not None:
            try:
                number = float(raw)
            except ValueError:
                number = math.nan
            if not 0 < number < math.inf:
                raise ValueError(f"{variable} must be a number above 0, got {raw!r}")
    for variable, least in _WHOLE_NUMBERS.items():
        if (raw := env_value(variable, environ)) is not None and not (
            raw.isascii() and raw.isdigit() and len(raw) < 12 and least <= int(raw) <= _MOST
        ):
            raise ValueError(f"{variable} must be a whole number from {least} to {_MOST:,}, got {raw!r}")
    for variable, choices in _CHOICES.items():
        if (raw := env_value(variable, environ)) is not None and raw.lower() not in choices:
            raise ValueError(f"{variable} must be one of {', '.join(choices)}, got {raw!r}")
    for variable, group in _ENTRY_POINT_NAMES.items():
        known = {point.name for point in entry_points(group=group)}
        for name in (env_value(variable, environ) or "").split(","):
            if name.strip() and name.strip().lower() not in known:
                raise ValueError(f"{variable} names no installed one ({', '.join(sorted(known))}), got {name!r}")
    _check_more(environ)


def _check_more(environ: Mapping[str, str]) -> None:
    """The sampler's ratio, the headers, the endpoints and the resource attributes."""
    ratio = env_value("OTEL_TRACES_SAMPLER_ARG", environ)
    if ratio is not None and (env_value("OTEL_TRACES_SAMPLER", environ) or "").lower() in _RATIO_SAMPLERS:
        try:
            share = float(ratio)
        except ValueError:
            share = math.nan
        if not 0 <= share <= 1:
            raise ValueError(f"OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1, got {ratio!r}")
    for signal in ("", "_TRACES", "_METRICS"):
        headers = env_value(f"OTEL_EXPORTER_OTLP{signal}_HEADERS", environ)
        if headers is not None and not _pairs(headers):
            raise ValueError(
                f"OTEL_EXPORTER_OTLP{signal}_HEADERS must be comma-separated key=value pairs, values URL-encoded "
                "(its value is not shown: it may hold credentials)"
            )
        endpoint = env_value(f"OTEL_EXPORTER_OTLP{signal}_ENDPOINT", environ)
        kinds = [signal[1:]] if signal else ["TRACES", "METRICS"]  # a grpc endpoint may have no scheme
        over_http = all(otlp_protocol(kind, environ) == "http/protobuf" for kind in kinds)
        if endpoint is not None and over_http and not endpoint.lower().startswith(("http://", "https://")):
            raise ValueError(
                f"OTEL_EXPORTER_OTLP{signal}_ENDPOINT must be an http:// or https:// URL, got {safe_url(endpoint)!r}"
            )
        for part in ("CERTIFICATE", "CLIENT_KEY", "CLIENT_CERTIFICATE"):
            file = env_value(f"OTEL_EXPORTER_OTLP{signal}_{part}", environ)
            if file is not None and not os.path.isfile(file):
                raise ValueError(f"OTEL_EXPORTER_OTLP{signal}_{part} names no file, got {file!r}")
    attributes = env_value("OTEL_RESOURCE_ATTRIBUTES", environ)
    if attributes is not None and not _pairs(attributes):
        raise ValueError(f"OTEL_RESOURCE_ATTRIBUTES must be comma-separated key=value pairs, got {attributes!r}")
    shutdown_timeout(None, environ)  # OTEL_REPEAT_GUARD_SHUTDOWN_TIMEOUT_S


def _pairs(text: str) -> bool:
    """Whether ``text`` is a comma-separated list of ``key=value`` (empty items aside), as the SDK reads it."""
    items = [item for item in text.split(",") if item.strip()]
    return all("=" in item and item.partition("=")[0].strip() for item in items)


def env_value(name: str, environ: Mapping[str, str]) -> str | None:
    value = environ.get(name, "").strip()
    return value or None


def otlp_protocol(signal: str, environ: Mapping[str, str]) -> str:
    variable = f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL"
    value = env_value(variable, environ)
    if value is None:
        variable = "OTEL_EXPORTER_OTLP_PROTOCOL"
        value = env_value(variable, environ) or "http/protobuf"
    if value not in PROTOCOLS:
        raise ValueError(f"{variable} must be one of {', '.join(PROTOCOLS)}, got {value!r}")
    return value


def signal_exporter_names(signal: str, environ: Mapping[str, str], default: str = "otlp") -> list[str]:
    """The entry-point names ``OTEL_<signal>_EXPORTER`` asks for (``TRACES``, ``METRICS``, ``LOGS``): a
    comma-separated list, ``default`` when unset, ``none`` for none, ``otlp`` over the signal's protocol."""
    variable = f"OTEL_{signal}_EXPORTER"
    raw = env_value(variable, environ) or default
    names = [name.strip().lower() for name in raw.split(",")]
    if not all(names):
        raise ValueError(f"{variable} has an empty item: {raw!r}")
    if "none" in names:
        if len(names) > 1:
            raise ValueError(f"{variable}: none cannot be combined with other exporters, got {raw!r}")
        return []
    return [OTLP_ENTRY_POINTS[otlp_protocol(signal, environ)] if name == "otlp" else name for name in names]

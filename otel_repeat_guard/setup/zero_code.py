"""Zero-code setup: ``opentelemetry-instrument`` adds the guard when ``OTEL_REPEAT_GUARD_ENABLED=true``.

``opentelemetry-instrument`` (opentelemetry-instrumentation) runs the distro, then one
``opentelemetry_configurator`` (the SDK's, which builds the ``TracerProvider`` from the
``OTEL_*`` variables), then the instrumentors, and last every
``opentelemetry_post_instrument`` entry point, with no arguments. The guard hooks in at
that last step, through :func:`post_instrument`, so it works with whichever distro and
configurator the user has: it adds itself to the global provider that already exists.
Reminders go to the process-wide :func:`~otel_repeat_guard.installed.default_inbox`. The guard's log events
(:mod:`otel_repeat_guard.decide.log_events`) go to the global ``LoggerProvider`` the configurator built with the
exporters ``OTEL_LOGS_EXPORTER`` names (``otlp`` by the distro's default): nothing to wire here.

This must never break the instrumented program: every failure is logged, not raised (a
raise would also skip the post-instrument hooks of other packages).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.sdk.environment_variables import OTEL_SDK_DISABLED

from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.core.sources import ENV_PREFIX, read_boolean, warn_unknown_variables
from otel_repeat_guard.decide.inbox import reminder_inbox
from otel_repeat_guard.installed import (
    default_inbox,
    installed_guard,
    set_installed_guard,
    set_not_installed,
    use_default_inbox,
)
from otel_repeat_guard.integrations._clients import client_adapters, enable_client_adapters
from otel_repeat_guard.processor import RepeatGuardSpanProcessor

logger = logging.getLogger("otel_repeat_guard")

ENABLED_ENV = ENV_PREFIX + "ENABLED"


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``OTEL_REPEAT_GUARD_ENABLED`` asks for the guard, read as every boolean setting is (empty: no);
    an unknown value raises ``ValueError``."""
    raw = (os.environ if environ is None else environ).get(ENABLED_ENV, "")
    return bool(raw.strip()) and read_boolean(ENABLED_ENV, raw)


def install(provider: object | None = None, config: GuardConfig | None = None) -> RepeatGuardSpanProcessor | None:
    """Add a guard to ``provider`` (default: the global one) unless this process already has one.

    Returns the guard, or None when the provider cannot take span processors (no SDK was
    configured, so there are no spans to watch).
    """
    existing = installed_guard()
    if existing is not None:
        return existing
    provider = trace.get_tracer_provider() if provider is None else provider
    add = getattr(provider, "add_span_processor", None)
    if add is None:
        _no_spans(f"the tracer provider is {type(provider).__name__}, not the SDK's")
        return None
    if os.environ.get(OTEL_SDK_DISABLED, "").strip().lower() == "true":  # as the SDK reads it
        _no_spans(f"{OTEL_SDK_DISABLED} is true, so the SDK makes no spans")
        return None
    config = GuardConfig.from_env() if config is None else config
    if config.shared_store:  # runs that span processes: reminders raised in a worker reach this process's inbox
        use_default_inbox(reminder_inbox(config))
    guard = RepeatGuardSpanProcessor(config, default_inbox().put, record_facts=True)
    add(guard)
    set_installed_guard(guard)
    logger.info("repeat guard installed on %s (thresholds %s)", type(provider).__name__, guard.config.thresholds)
    return guard


def _no_spans(why: str) -> None:
    reason = f"{ENABLED_ENV} is set but {why}"
    logger.warning("%s: no spans to watch, guard not installed", reason)
    set_not_installed(reason)


def post_instrument(*_args: object, **_kwargs: object) -> None:
    """The ``opentelemetry_post_instrument`` entry point. Never raises: a bad value is one error line naming
    the variable and the value, the program runs unguarded, and framework adapters built without a guard
    pass their calls through, saying why (:func:`~otel_repeat_guard.installed.not_installed`)."""
    try:
        warn_unknown_variables()  # a misspelled ENABLED installs nothing: say why
        if enabled():
            adapters = client_adapters()  # an unknown name fails before anything is installed
            if install() is not None:
                enable_client_adapters(adapters)
    except Exception as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__  # one line, whatever the message holds
        logger.error("repeat guard not installed, the program runs unguarded: %s", reason)
        set_not_installed(reason)

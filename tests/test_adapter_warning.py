"""An adapter whose framework's spans never reach the guard says so once, naming the instrumentation to install."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

from otel_repeat_guard import ReminderInbox, RepeatGuardSpanProcessor
from otel_repeat_guard.integrations import _unseen, take_reminders

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    _unseen.forget()
    yield
    _unseen.forget()


@pytest.fixture
def guarded() -> Iterator[tuple[TracerProvider, RepeatGuardSpanProcessor, ReminderInbox]]:
    inbox = ReminderInbox()
    guard = RepeatGuardSpanProcessor(on_reminder=inbox.put)
    provider = TracerProvider()
    provider.add_span_processor(guard)
    yield provider, guard, inbox
    provider.shutdown()


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "otel_repeat_guard" and r.levelno == logging.WARNING]


def test_an_adapter_with_no_span_around_its_model_requests_warns_once_at_the_second(
    guarded: tuple[TracerProvider, RepeatGuardSpanProcessor, ReminderInbox], caplog: pytest.LogCaptureFixture
) -> None:
    _, guard, inbox = guarded
    assert take_reminders(guard, inbox, framework="langchain") == []
    assert warnings_of(caplog) == []  # the first model request has not gone out yet
    for _ in range(5):
        assert take_reminders(guard, inbox, framework="langchain") == []
    assert warnings_of(caplog) == [
        "repeat guard: the langchain adapter ran before 2 model requests, but no span of that run reached the "
        "guard, so its tool calls are not counted: install openinference-instrumentation-langchain "
        "(pip install 'otel-repeat-guard[langchain]'), then LangChainInstrumentor().instrument("
        "tracer_provider=provider) from openinference.instrumentation.langchain "
        "(docs/runtimes.md, 'Turn it on, per framework')"
    ]


def test_an_adapter_inside_a_run_the_guard_sees_never_warns(
    guarded: tuple[TracerProvider, RepeatGuardSpanProcessor, ReminderInbox], caplog: pytest.LogCaptureFixture
) -> None:
    provider, guard, inbox = guarded
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("invoke_agent weather", attributes={"gen_ai.operation.name": "invoke_agent"}):
        take_reminders(guard, inbox, framework="crewai")
    for _ in range(3):  # later requests outside any span: the framework was seen, so this is no missing instrumentation
        take_reminders(guard, inbox, framework="crewai")
    assert warnings_of(caplog) == []


def test_each_framework_warns_for_itself_and_a_framework_that_traces_itself_says_how(
    guarded: tuple[TracerProvider, RepeatGuardSpanProcessor, ReminderInbox], caplog: pytest.LogCaptureFixture
) -> None:
    _, guard, inbox = guarded
    for framework in ("strands", "haystack", "strands", "haystack"):
        take_reminders(guard, inbox, framework=framework)
    found = warnings_of(caplog)
    assert len(found) == 2
    assert "strands traces itself: trace.set_tracer_provider(provider) before the first agent" in found[0]
    assert "install openinference-instrumentation-haystack (pip install 'otel-repeat-guard[haystack]')" in found[1]


def test_every_framework_adapter_names_its_framework_and_its_extra_installs_the_package() -> None:
    """Each adapter module passes a framework the warning knows, and the extra it names holds the package."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    named = set()
    for module in (ROOT / "otel_repeat_guard" / "integrations").glob("*.py"):
        named |= set(re.findall(r'framework="([a-z-]+)"', module.read_text(encoding="utf-8")))
    assert named == set(_unseen.INSTRUMENTATIONS)
    for framework, known in _unseen.INSTRUMENTATIONS.items():
        requirements = {re.split(r"[\[<>=!~ ]", r, maxsplit=1)[0] for r in extras[known.extra]}
        assert known.package is None or known.package in requirements, framework

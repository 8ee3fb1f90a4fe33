"""pydantic-ai with otel-repeat-guard: the guard, its reminders in the model's next request, the store.

    pip install 'otel-repeat-guard[pydantic-ai,openai,dashboard]'
    OPENAI_API_KEY=... python pydantic_ai_weather.py  # OPENAI_BASE_URL: any OpenAI-compatible server

Wired as docs/runtimes.md shows for pydantic-ai; the guard and the store through configure().
"""

from pydantic_ai import Agent, InstrumentationSettings

from otel_repeat_guard import configure
from otel_repeat_guard.integrations.pydantic_ai import repeat_guard_capability

# The guard on a tracer provider, and the store the dashboard reads; no OTLP collector needed.
telemetry = configure(store="repeat-guard.db", span_exporters=[], metric_readers=[])
guard, inbox, provider = telemetry.guard, telemetry.inbox, telemetry.tracer_provider

# pydantic-ai traces itself: its spans go to the provider the guard is on.
Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))

# The adapter: the run's due reminders go into the model's next request.
agent = Agent(
    "openai:gpt-4o-mini",
    name="weather",
    instructions="Answer with the get_weather tool.",
    capabilities=[repeat_guard_capability(guard=guard, inbox=inbox)],
)


@agent.tool_plain
def get_weather(city: str) -> str:
    """Today's weather in a city."""
    return f"{city}: 18 degrees, cloudy"


result = agent.run_sync("What is the weather in Paris?")
print(result.output)

telemetry.shutdown()  # flushes the last spans into the store
print("The loops, in the browser: otel-repeat-guard dashboard --db repeat-guard.db")

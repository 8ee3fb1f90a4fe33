"""The OpenAI Agents SDK with otel-repeat-guard: the guard, its reminders in the model's next request, the store.

    pip install 'otel-repeat-guard[openai-agents,dashboard]'
    OPENAI_API_KEY=... python openai_agents_weather.py  # OPENAI_BASE_URL: any OpenAI-compatible server

Wired as docs/runtimes.md shows for the OpenAI Agents SDK; the guard and the store by hand, as in the README.
"""

from agents import Agent, RunConfig, Runner, function_tool, set_trace_processors
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_repeat_guard import ReminderInbox, RepeatGuardSpanProcessor
from otel_repeat_guard.integrations.openai_agents import repeat_guard_input_filter
from otel_repeat_guard.store import SQLiteSpanExporter

# The guard first on the tracer provider, then the store the dashboard reads (a local SQLite file).
inbox = ReminderInbox()
guard = RepeatGuardSpanProcessor(on_reminder=inbox.put)
provider = TracerProvider()
provider.add_span_processor(guard)
provider.add_span_processor(BatchSpanProcessor(SQLiteSpanExporter("repeat-guard.db", config=guard.config)))

# The SDK's runs as OpenTelemetry spans (and not uploaded to OpenAI's trace viewer: drop that line to keep it).
set_trace_processors([])
OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)


@function_tool
def get_weather(city: str) -> str:
    """Today's weather in a city."""
    return f"{city}: 18 degrees, cloudy"


agent = Agent(name="weather", instructions="Answer with the get_weather tool.", tools=[get_weather])
# The adapter: the run's due reminders go into the model's next request.
run_config = RunConfig(call_model_input_filter=repeat_guard_input_filter(guard=guard, inbox=inbox))
result = Runner.run_sync(agent, "What is the weather in Paris?", run_config=run_config)
print(result.final_output)

provider.shutdown()  # flushes the last spans into the store
print("The loops, in the browser: otel-repeat-guard dashboard --db repeat-guard.db")

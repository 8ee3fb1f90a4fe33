"""CrewAI with otel-repeat-guard: the guard, its reminders in the model's next request, the store.

    pip install 'otel-repeat-guard[crewai,dashboard]'
    OPENAI_API_KEY=... python crewai_weather.py  # OPENAI_BASE_URL: any OpenAI-compatible server

Wired as docs/runtimes.md shows for CrewAI; the guard and the store through configure().
"""

from crewai import LLM, Agent, Crew, Task
from crewai.tools import tool
from openinference.instrumentation.crewai import CrewAIInstrumentor
from openinference.instrumentation.openai import OpenAIInstrumentor

from otel_repeat_guard import configure
from otel_repeat_guard.integrations.crewai import register_repeat_guard_hook

# The guard on a tracer provider, and the store the dashboard reads; no OTLP collector needed.
telemetry = configure(store="repeat-guard.db", span_exporters=[], metric_readers=[])
guard, inbox, provider = telemetry.guard, telemetry.inbox, telemetry.tracer_provider

# CrewAI's agents and tools, and the model calls, as OpenTelemetry spans on the provider the guard is on.
CrewAIInstrumentor().instrument(tracer_provider=provider)
OpenAIInstrumentor().instrument(tracer_provider=provider)  # cached repeats are counted from the model's requests

# The adapter: a before_llm_call hook puts the run's due reminders into the model's next request.
register_repeat_guard_hook(guard=guard, inbox=inbox)


@tool("get_weather")
def get_weather(city: str) -> str:
    """Today's weather in a city."""
    return f"{city}: 18 degrees, cloudy"


agent = Agent(
    role="weather agent",
    goal="answer weather questions",
    backstory="a forecaster",
    llm=LLM(model="openai/gpt-4o-mini"),
    tools=[get_weather],
)
task = Task(description="What is the weather in Paris?", expected_output="the weather", agent=agent)
print(Crew(agents=[agent], tasks=[task]).kickoff().raw)

telemetry.shutdown()  # flushes the last spans into the store
print("The loops, in the browser: otel-repeat-guard dashboard --db repeat-guard.db")

"""LangGraph with otel-repeat-guard: the guard, its reminders in the model's next request, the store.

    pip install 'otel-repeat-guard[langchain,dashboard]' langchain-openai
    OPENAI_API_KEY=... python langgraph_weather.py  # OPENAI_BASE_URL: any OpenAI-compatible server

Wired as docs/runtimes.md shows for LangChain / LangGraph; the guard and the store by hand, as in the README.
The agent is LangChain 1.x's create_agent, a LangGraph graph (LangGraph's create_react_agent, which LangGraph 1.x
deprecates for it, takes pre_model_hook=repeat_guard_pre_model_hook(guard=guard, inbox=inbox) instead).
"""

from langchain.agents import create_agent
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_repeat_guard import ReminderInbox, RepeatGuardSpanProcessor
from otel_repeat_guard.integrations.langchain import RepeatGuardMiddleware
from otel_repeat_guard.store import SQLiteSpanExporter

# The guard first on the tracer provider, then the store the dashboard reads (a local SQLite file).
inbox = ReminderInbox()
guard = RepeatGuardSpanProcessor(on_reminder=inbox.put)
provider = TracerProvider()
provider.add_span_processor(guard)
provider.add_span_processor(BatchSpanProcessor(SQLiteSpanExporter("repeat-guard.db", config=guard.config)))

# LangChain's runs, models and tools as OpenTelemetry spans, on the provider the guard is on.
LangChainInstrumentor().instrument(tracer_provider=provider)


@tool
def get_weather(city: str) -> str:
    """Today's weather in a city."""
    return f"{city}: 18 degrees, cloudy"


# The adapter: the run's due reminders go into the model's next request.
agent = create_agent(
    ChatOpenAI(model="gpt-4o-mini"),
    [get_weather],
    name="weather",
    middleware=[RepeatGuardMiddleware(guard=guard, inbox=inbox)],
)
result = agent.invoke({"messages": [("user", "What is the weather in Paris?")]})
print(result["messages"][-1].content)

provider.shutdown()  # flushes the last spans into the store
print("The loops, in the browser: otel-repeat-guard dashboard --db repeat-guard.db")

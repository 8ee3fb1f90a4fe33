"""A plain OpenAI client loop with otel-repeat-guard: no framework, the guarded client, the store.

    pip install 'otel-repeat-guard[openai,dashboard]' openinference-instrumentation-openai
    OPENAI_API_KEY=... python openai_client_loop.py  # OPENAI_BASE_URL: any OpenAI-compatible server

The loop opens the agent run's span and one span per tool call; the client adapter (docs/runtimes.md, "any
framework on the OpenAI SDK") adds the run's due reminders to the next request. Guard and store: configure().
"""

import json

import openai
from openinference.instrumentation.openai import OpenAIInstrumentor

from otel_repeat_guard import configure
from otel_repeat_guard.integrations.openai_client import guard_client

telemetry = configure(store="repeat-guard.db", span_exporters=[], metric_readers=[])
tracer = telemetry.tracer_provider.get_tracer("weather-loop")
OpenAIInstrumentor().instrument(tracer_provider=telemetry.tracer_provider)  # the model calls and their tokens
client = guard_client(openai.OpenAI(), guard=telemetry.guard, inbox=telemetry.inbox)

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
GET_WEATHER = {"name": "get_weather", "description": "Today's weather in a city.", "parameters": CITY}
TOOLS = [{"type": "function", "function": GET_WEATHER}]


def get_weather(city: str) -> str:
    return f"{city}: 18 degrees, cloudy"


messages: list = [{"role": "user", "content": "What is the weather in Paris?"}]
run = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather"}
with tracer.start_as_current_span("invoke_agent weather", attributes=run):
    for _ in range(20):
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS).choices[0].message
        if not reply.tool_calls:
            break
        messages.append({"role": "assistant", "tool_calls": [call.model_dump() for call in reply.tool_calls]})
        for call in reply.tool_calls:
            name, arguments = call.function.name, call.function.arguments
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.call.id": call.id,
                "gen_ai.tool.call.arguments": arguments,
            }
            with tracer.start_as_current_span(f"execute_tool {name}", attributes=attributes):
                result = get_weather(**json.loads(arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
print(reply.content)

telemetry.shutdown()  # flushes the last spans into the store
print("The loops, in the browser: otel-repeat-guard dashboard --db repeat-guard.db")

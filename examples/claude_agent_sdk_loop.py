"""The Claude Agent SDK with otel-repeat-guard: hooks that count Claude's tool calls, remind, and fill the store.

    pip install 'otel-repeat-guard[claude,dashboard]'
    ANTHROPIC_API_KEY=... python claude_agent_sdk_loop.py  # ANTHROPIC_BASE_URL: another Messages API endpoint

Claude Code (bundled with the SDK) runs the tools, so no tool span reaches Python: the adapter's hooks make
one per call and answer with the reminder beside the tool result (docs/runtimes.md, docs/claude-code.md).
"""

import asyncio

from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query

from otel_repeat_guard import configure
from otel_repeat_guard.integrations.claude_agent_sdk import RepeatGuardHooks

# The guard on a tracer provider, and the store the dashboard reads; no OTLP collector needed.
telemetry = configure(store="repeat-guard.db", span_exporters=[], metric_readers=[])
guard, inbox, provider = telemetry.guard, telemetry.inbox, telemetry.tracer_provider

# The adapter: PostToolUse hooks that record each call and hand Claude the run's due reminders.
hooks = RepeatGuardHooks(guard=guard, inbox=inbox, tracer_provider=provider)
options = ClaudeAgentOptions(hooks=hooks.hooks(), allowed_tools=["Bash"], max_turns=30)


async def main() -> None:
    async for message in query(prompt="Print the word 'looping' with Bash.", options=options):
        if isinstance(message, ResultMessage):
            print(message.result)


asyncio.run(main())

telemetry.shutdown()  # flushes the last spans into the store
print("The loops, in the browser: otel-repeat-guard dashboard --db repeat-guard.db")

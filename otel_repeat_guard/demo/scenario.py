"""The demo's scripted workload, as plain data.

Each agent follows a fixed script, so the numbers it produces are known in advance: the
tests replay these scripts with their own simple counter and compare the dashboard's
figures with the result. Nothing here talks to OpenTelemetry; ``runner`` does that.

Every tool call is asked for by a model call just before it (and each prompt ends with a model
call that answers), with real model names that genai-prices knows and token counts that grow
with the conversation (:func:`model_tokens`). Some agents heed a reminder and change course (the
coder after the detailed one, the log reader after the gentle one), others ignore them (the
analyst, the operator's denied shell call), and one subagent ends its run right after one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call as the scripted model emits it: the arguments are the model's JSON text."""

    tool: str
    arguments: str
    duration_ms: int = 120
    denied: bool = False
    recorded: bool = True
    """False: the tool span records no arguments (as some instrumentations do by default), so the guard
    cannot compare the call: it counts it as unguarded, and as a call that breaks any run."""


@dataclass(frozen=True, slots=True)
class Model:
    """The model an agent calls, as its model-call spans name it (``gen_ai.provider.name``, ``gen_ai.request.model``)."""

    name: str
    provider: str


MODEL_LATENCY_MS = 700
"""The simulated time of each model call."""


def model_tokens(turn: int, call: Call | None) -> tuple[int, int]:
    """Input and output tokens of an agent run's ``turn``-th model call (from 0), which asks for ``call``
    (None: the final answer). The input grows with every tool result in the context."""
    input_tokens = 2_400 + 650 * turn
    output_tokens = 180 if call is None else 40 + len(call.arguments) // 3
    return input_tokens, output_tokens


def model_output(call: Call | None) -> str:
    """What the scripted model answers (the model call's ``gen_ai.output.messages`` text part)."""
    return "Here is what I found." if call is None else f"Calling {call.tool} with {call.arguments}"


@dataclass(frozen=True, slots=True)
class Subagent:
    """A subagent started by its parent: its own agent run, on its own thread, alongside the parent."""

    name: str
    calls: tuple[Call, ...]
    model: Model | None = None  # None: the parent's model


Step = Call | Subagent


@dataclass(frozen=True, slots=True)
class Prompt:
    """One user prompt: a fresh agent run (a new ``invoke_agent`` span, or ``reset`` for explicit ids)."""

    steps: tuple[Step, ...]


@dataclass(frozen=True, slots=True)
class AgentScript:
    """One agent and everything it does.

    With ``explicit_id`` the tool spans carry ``gen_ai.agent.id`` and a new prompt calls
    ``RepeatGuardSpanProcessor.reset``; without it the guard finds the agent through the
    ``invoke_agent`` span, and each prompt's new span starts a new chain.
    """

    name: str
    service: str
    prompts: tuple[Prompt, ...]
    explicit_id: str | None = None
    model: Model = Model("gpt-4o", "openai")
    conversation: str | None = None
    """``gen_ai.conversation.id`` of its model calls (a subagent's too): its prompts' runs form one conversation."""


def _repeat(call: Call, times: int) -> tuple[Call, ...]:
    return (call,) * times


def _researcher(name: str) -> AgentScript:
    search = Call("web_search", '{"query": "opentelemetry genai tool span attributes"}', 400)
    spec = Call("read_url", '{"url": "https://opentelemetry.io/docs/specs/semconv/gen-ai/"}', 650)
    fact_checker = Subagent(
        f"{name}/fact-checker",
        (Call("web_search", '{"query": "gen_ai.tool.call.arguments"}', 380), *_repeat(spec, 5)),
    )
    return AgentScript(
        name,
        "research-assistant",
        (
            Prompt(
                (
                    search,
                    Call("web_search", '{"query": "otel span events after end"}', 420),
                    fact_checker,
                    Call("read_url", '{"url": "https://github.com/open-telemetry/semantic-conventions"}', 700),
                    Call("summarize", '{"max_words": 200, "topic": "tool spans"}', 900),
                    search,
                    search,  # a run of two at the end of the first prompt ...
                )
            ),
            # ... and two more after a second user prompt: the new agent run resets the chain.
            Prompt((search, search, Call("summarize", '{"max_words": 120, "topic": "follow-up"}', 800))),
        ),
        model=Model("claude-sonnet-4-5", "anthropic"),
        conversation=f"{name}-conversation",
    )


def _coder(name: str) -> AgentScript:
    # Key-order variants of one argument object: the guard counts them as identical.
    variants = (
        '{"path": "tests/unit", "verbose": true}',
        '{"verbose": true, "path": "tests/unit"}',
        '{"verbose":true,"path":"tests/unit"}',
    )
    run_tests = tuple(Call("run_tests", variants[i % 3], 1500) for i in range(8))
    grep = Call("grep", '{"pattern": "def parse_config", "path": "src"}', 90)
    todo = Call("todo_write", '{"todos": [{"content": "fix parse_config", "status": "in_progress"}]}', 20)
    return AgentScript(
        name,
        "coding-agent",
        (
            Prompt(
                (
                    Call("read_file", '{"path": "src/config.py"}', 60),
                    Call("read_file", '{"path": "src/cli.py"}', 60),
                    Call("edit_file", '{"path": "src/config.py", "old": "timeout=3", "new": "timeout=30"}', 80),
                    *run_tests,
                    # The excluded bookkeeping tool interleaved in a loop: it neither extends nor breaks it.
                    grep,
                    todo,
                    grep,
                    todo,
                    grep,
                    todo,
                    grep,
                    Call("edit_file", '{"path": "src/config.py", "old": "parse_config(", "new": "load_config("}', 80),
                )
            ),
        ),
        model=Model("gpt-4o", "openai"),
        conversation=f"{name}-session",
    )


def _operator(name: str) -> AgentScript:
    denied = Call("shell", '{"command": "sudo systemctl restart api"}', 15, denied=True)
    tail = Call("tail_logs", '{"service": "api", "lines": 200}', 300)
    return AgentScript(
        name,
        "ops-bot",
        (
            Prompt(
                (
                    Call("read_file", '{"path": "/etc/api/config.yaml"}', 40),
                    Subagent(
                        f"{name}/log-reader",
                        (tail, tail, tail, Call("grep", '{"pattern": "ERROR"}', 120)),  # heeds the gentle reminder
                        Model("claude-3-5-haiku-latest", "anthropic"),
                    ),
                    *_repeat(denied, 6),  # a denied call, hammered
                    Call("shell", '{"command": "systemctl status api"}', 200),
                    Call("http_get", '{"url": "http://api.internal/health"}', 60, recorded=False),
                )
            ),
        ),
        model=Model("gpt-4o-mini", "openai"),
        conversation=f"{name}-incident",
    )


def _analyst(name: str) -> AgentScript:
    stuck = Call("sql_query", '{"sql": "SELECT count(*) FROM orders WHERE status = \'stuck\'"}', 250)
    return AgentScript(
        name,
        "research-assistant",
        (
            Prompt(
                (
                    Call("sql_query", '{"sql": "SELECT status, count(*) FROM orders GROUP BY status"}', 300),
                    *_repeat(stuck, 12),  # past the highest threshold the guard goes silent
                    Call("chart", '{"kind": "bar", "table": "orders"}', 500),
                )
            ),
            Prompt((stuck, stuck, Call("sql_query", '{"sql": "SELECT max(updated_at) FROM orders"}', 280))),
        ),
        explicit_id=f"{name}-agent-id",
        model=Model("gemini-2.5-flash", "gcp.gemini"),
        conversation=f"{name}-conversation",
    )


_PERSONAS = (("researcher", _researcher), ("coder", _coder), ("operator", _operator), ("analyst", _analyst))
DEFAULT_AGENTS = len(_PERSONAS)


def scenario(agents: int = DEFAULT_AGENTS) -> tuple[AgentScript, ...]:
    """The scripts of ``agents`` top-level agents, cycling through the personas."""
    if not isinstance(agents, int) or isinstance(agents, bool) or agents < 1:
        raise ValueError(f"agents must be an integer >= 1, got {agents!r}")
    scripts = []
    for index in range(agents):
        persona, build = _PERSONAS[index % len(_PERSONAS)]
        round_ = index // len(_PERSONAS)
        scripts.append(build(persona if round_ == 0 else f"{persona}-{round_ + 1}"))
    return tuple(scripts)

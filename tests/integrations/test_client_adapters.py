"""The model-client adapters, with the real ``openai``, ``anthropic`` and ``litellm`` SDKs against local fake servers.

A small harness loop plays the agent: inside an ``invoke_agent`` span on a real TracerProvider
with the guard, it calls the model, runs each ``lookup`` the model asks for in an
``execute_tool`` span, and calls again (``REPEAT3``: three identical calls, then the answer).
Every variant (each SDK, sync and async, each API, streamed or not) is played twice on fresh
servers: once with a plain client, once guarded. The servers keep each body as received, so
the test compares bytes: requests 1-3 of the guarded client are the plain client's, byte for
byte, and its 4th is the plain 4th with exactly the reminder message added, after the tool results.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer

from otel_repeat_guard.integrations import _clients
from otel_repeat_guard.integrations._clients import (
    CLIENT_ADAPTERS_ENV,
    Conversation,
    Sources,
    client_adapters,
    enable_client_adapters,
    with_reminders,
)
from otel_repeat_guard.integrations._common import reminder_message

from .fake_anthropic import FakeAnthropic
from .fake_openai import FakeOpenAI
from .scenario import (
    FINAL_ANSWER,
    GENTLE,
    LOOP,
    ONE_CALL,
    REPEAT3,
    Guarded,
    assert_gentle_reminder_delivered_once,
    assert_nothing_delivered,
    lookup_result,
    make_guarded,
    next_call,
    openai_messages,
    provider_for,
    require,
    usage_after,
)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # else importing litellm fetches its cost map online
require("openai")
require("anthropic")
require("litellm")
import anthropic  # noqa: E402
import litellm  # noqa: E402
import openai  # noqa: E402
from openai.resources.chat.completions import AsyncCompletions, Completions  # noqa: E402

from otel_repeat_guard.integrations import anthropic_client, litellm_client, openai_client  # noqa: E402

MODEL = "gpt-4o-mini"
CLAUDE = "claude-sonnet-4-5"
PARIS_PROMPT = "Weather in Paris?"
LYON_PROMPT = "Weather in Lyon?"
MAX_TURNS = len(LOOP) + 2  # the longest scenario's model calls, and then some: a loop that never ends fails
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "units": {"type": "string"}},
    "required": ["city", "units"],
}
CHAT_TOOLS = [
    {"type": "function", "function": {"name": "lookup", "description": "Look up the weather.", "parameters": SCHEMA}}
]
RESPONSES_TOOLS = [{"type": "function", "name": "lookup", "description": "Look up the weather.", "parameters": SCHEMA}]
ANTHROPIC_TOOLS = [{"name": "lookup", "description": "Look up the weather.", "input_schema": SCHEMA}]
Calls = list[tuple[str, str, str]]  # (call id, tool name, arguments as JSON): what the model asked for


# -- the fake OpenAI server, with the Responses API and the bytes received ------------------------


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content or "")


def responses_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    items = body.get("input")
    return [{"role": "user", "content": items}] if isinstance(items, str) else list(items or ())


def first_prompt(body: dict[str, Any]) -> str:
    """The first user message of a chat, Responses or Messages request body."""
    items = body["messages"] if "messages" in body else responses_items(body)
    return next((_text(m.get("content")) for m in items if m.get("role") == "user"), "")


class FakeOpenAIServer(FakeOpenAI):
    """:class:`FakeOpenAI`, keeping each body as received (``raw``), and serving ``POST /v1/responses``.

    A Responses request whose input holds ``i`` ``function_call_output`` items since the last real
    user message gets ``script[i]`` as one ``function_call`` output item, or the final answer, with
    the usage of :func:`scenario.usage_after` (as the chat completions it serves).
    """

    def __init__(self, script: Any = REPEAT3, by_prompt: dict[str, Any] | None = None) -> None:
        self.raw: list[bytes] = []
        super().__init__(script, by_prompt)

    def response(self, body: dict[str, Any]) -> dict[str, Any]:
        items = responses_items(body)
        results = 0
        for item in items:
            if item.get("role") == "user" and "<system-reminder>" not in _text(item.get("content")):
                results = 0
            elif item.get("type") == "function_call_output":
                results += 1
        prompt = first_prompt(body)
        script = next((s for key, s in self.by_prompt.items() if key in prompt), self.script)
        call = next_call(results, script)
        if call is None:
            content = [{"type": "output_text", "text": FINAL_ANSWER, "annotations": []}]
            output = [
                {
                    "type": "message",
                    "id": self.next_id("msg_"),
                    "role": "assistant",
                    "status": "completed",
                    "content": content,
                }
            ]
        else:
            name, arguments = call
            output = [
                {
                    "type": "function_call",
                    "id": self.next_id("fc_"),
                    "call_id": self.next_id("call_"),
                    "name": name,
                    "arguments": json.dumps(arguments),
                    "status": "completed",
                }
            ]
        return {
            "id": self.next_id("resp_"),
            "object": "response",
            "created_at": 1_700_000_000,
            "status": "completed",
            "model": body.get("model") or MODEL,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": body.get("tools") or [],
            "usage": {
                "input_tokens": (tokens := usage_after(results))["input"],
                "output_tokens": tokens["output"],
                "total_tokens": tokens["input"] + tokens["output"],
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }

    def _handler(self) -> Any:
        server = self
        base: Any = super()._handler()

        class Handler(base):  # type: ignore[misc,valid-type]
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with server._lock:
                    server.raw.append(raw)
                if not self.path.rstrip("/").endswith("/responses"):
                    connection, self.rfile = self.rfile, io.BytesIO(raw)  # FakeOpenAI reads the body again
                    try:
                        super().do_POST()
                    finally:
                        self.rfile = connection  # the next request on this connection
                    return
                body = json.loads(raw)
                with server._lock:
                    server.requests.append(body)
                response = server.response(body)
                if not body.get("stream"):
                    self._json(response)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                started = {**response, "status": "in_progress", "output": []}
                for n, (event, data) in enumerate((("response.created", started), ("response.completed", response))):
                    payload = json.dumps({"type": event, "sequence_number": n, "response": data})
                    self.wfile.write(f"event: {event}\ndata: {payload}\n\n".encode())
                self.wfile.flush()
                self.close_connection = True

        return Handler


# -- the three request shapes -------------------------------------------------------------------


def chat_calls(completion: Any) -> Calls:
    return [(c.id, c.function.name, c.function.arguments) for c in completion.choices[0].message.tool_calls or ()]


def chat_stream_calls(chunks: Sequence[Any]) -> Calls:
    calls: dict[int, list[str]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or ():
                call = calls.setdefault(delta.index, ["", "", ""])
                call[0] += delta.id or ""
                call[1] += delta.function.name or ""
                call[2] += delta.function.arguments or ""
    return [(i, n, a) for i, n, a in calls.values()]


def responses_calls(response: Any) -> Calls:
    return [(o.call_id, o.name, o.arguments) for o in response.output if o.type == "function_call"]


def completed(events: Sequence[Any]) -> Any:
    return next(e.response for e in events if e.type == "response.completed")


def messages_calls(message: Any) -> Calls:
    return [(b.id, b.name, json.dumps(b.input)) for b in message.content if b.type == "tool_use"]


class Chat:
    """Chat Completions (the openai SDK, and LiteLLM): ``messages``."""

    @staticmethod
    def start(prompt: str) -> list[Any]:
        return [{"role": "user", "content": prompt}]

    @staticmethod
    def kwargs(state: list[Any]) -> dict[str, Any]:
        return {"model": MODEL, "messages": list(state), "tools": CHAT_TOOLS}

    @staticmethod
    def record(state: list[Any], calls: Calls, results: list[str]) -> None:
        tool_calls = [{"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls]
        state.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
        state.extend(
            {"role": "tool", "tool_call_id": i, "content": r} for (i, _, _), r in zip(calls, results, strict=True)
        )

    pairs = staticmethod(openai_messages)

    @staticmethod
    def expected(body: dict[str, Any], text: str) -> dict[str, Any]:
        return {**body, "messages": [*body["messages"], {"role": "user", "content": text}]}


class Responses:
    """The Responses API: ``input``."""

    @staticmethod
    def start(prompt: str) -> list[Any]:
        return [{"role": "user", "content": prompt}]

    @staticmethod
    def kwargs(state: list[Any]) -> dict[str, Any]:
        return {"model": MODEL, "input": list(state), "tools": RESPONSES_TOOLS}

    @staticmethod
    def record(state: list[Any], calls: Calls, results: list[str]) -> None:
        for (i, n, a), r in zip(calls, results, strict=True):
            state.append({"type": "function_call", "call_id": i, "name": n, "arguments": a})
            state.append({"type": "function_call_output", "call_id": i, "output": r})

    @staticmethod
    def pairs(body: dict[str, Any]) -> list[tuple[str, str]]:
        out = []
        for item in responses_items(body):
            if "role" in item:
                out.append((item["role"], _text(item.get("content"))))
            elif item.get("type") == "function_call":
                out.append(("assistant", item["arguments"]))
            elif item.get("type") == "function_call_output":
                out.append(("tool", item["output"]))
        return out

    @staticmethod
    def expected(body: dict[str, Any], text: str) -> dict[str, Any]:
        return {**body, "input": [*body["input"], {"role": "user", "content": text}]}


class Messages:
    """Anthropic Messages: ``messages`` of content blocks; tool results are a user turn."""

    @staticmethod
    def start(prompt: str) -> list[Any]:
        return [{"role": "user", "content": prompt}]

    @staticmethod
    def kwargs(state: list[Any]) -> dict[str, Any]:
        return {"model": CLAUDE, "max_tokens": 1024, "messages": list(state), "tools": ANTHROPIC_TOOLS}

    @staticmethod
    def record(state: list[Any], calls: Calls, results: list[str]) -> None:
        uses = [{"type": "tool_use", "id": i, "name": n, "input": json.loads(a)} for i, n, a in calls]
        state.append({"role": "assistant", "content": uses})
        blocks = [
            {"type": "tool_result", "tool_use_id": i, "content": r} for (i, _, _), r in zip(calls, results, strict=True)
        ]
        state.append({"role": "user", "content": blocks})

    @staticmethod
    def pairs(body: dict[str, Any]) -> list[tuple[str, str]]:
        out = []
        for message in body["messages"]:
            content = message["content"]
            for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
                if block["type"] == "tool_result":
                    out.append(
                        ("tool", _text(block["content"]) if isinstance(block["content"], list) else block["content"])
                    )
                elif block["type"] == "tool_use":
                    out.append(("assistant", json.dumps(block["input"])))
                else:
                    out.append((message["role"], block["text"]))
        return out

    @staticmethod
    def expected(body: dict[str, Any], text: str) -> dict[str, Any]:
        *head, last = body["messages"]
        return {**body, "messages": [*head, {**last, "content": [*last["content"], {"type": "text", "text": text}]}]}


# -- the variants -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    name: str
    api: Any
    server: Callable[..., Any]
    is_async: bool
    send: Callable[[Any, dict[str, Any]], Any]  # (client, kwargs) -> Calls (a coroutine when is_async)
    client: Callable[[Any], Any]  # server -> client (None for LiteLLM)
    stream: bool = False

    def __str__(self) -> str:
        return self.name


async def _achat(c: Any, kw: dict[str, Any]) -> Calls:
    return chat_calls(await c.chat.completions.create(**kw))


async def _achat_stream(c: Any, kw: dict[str, Any]) -> Calls:
    return chat_stream_calls([chunk async for chunk in await c.chat.completions.create(**kw, stream=True)])


async def _aresponses(c: Any, kw: dict[str, Any]) -> Calls:
    return responses_calls(await c.responses.create(**kw))


async def _aresponses_stream(c: Any, kw: dict[str, Any]) -> Calls:
    return responses_calls(completed([e async for e in await c.responses.create(**kw, stream=True)]))


async def _amessages(c: Any, kw: dict[str, Any]) -> Calls:
    return messages_calls(await c.messages.create(**kw))


async def _amessages_stream(c: Any, kw: dict[str, Any]) -> Calls:
    async with c.messages.stream(**kw) as stream:
        return messages_calls(await stream.get_final_message())


def _messages_stream(c: Any, kw: dict[str, Any]) -> Calls:
    with c.messages.stream(**kw) as stream:
        return messages_calls(stream.get_final_message())


def _litellm_kwargs(c: Any, kw: dict[str, Any]) -> dict[str, Any]:
    return {**kw, "model": f"openai/{MODEL}", "api_base": c, "api_key": "offline"}


async def _alitellm(c: Any, kw: dict[str, Any]) -> Calls:
    return chat_calls(await litellm.acompletion(**_litellm_kwargs(c, kw)))


def _openai(server: Any) -> Any:
    return openai.OpenAI(base_url=server.base_url, api_key="offline", max_retries=0)


def _async_openai(server: Any) -> Any:
    return openai.AsyncOpenAI(base_url=server.base_url, api_key="offline", max_retries=0)


def _anthropic(server: Any) -> Any:
    return anthropic.Anthropic(base_url=server.base_url, api_key="offline", max_retries=0)


def _async_anthropic(server: Any) -> Any:
    return anthropic.AsyncAnthropic(base_url=server.base_url, api_key="offline", max_retries=0)


def _base_url(server: Any) -> Any:
    return server.base_url  # LiteLLM has no client object: the "client" is where it sends requests


VARIANTS = [
    Variant(
        "openai-chat", Chat, FakeOpenAIServer, False, lambda c, kw: chat_calls(c.chat.completions.create(**kw)), _openai
    ),
    Variant("openai-chat-async", Chat, FakeOpenAIServer, True, _achat, _async_openai),
    Variant(
        "openai-chat-stream",
        Chat,
        FakeOpenAIServer,
        False,
        lambda c, kw: chat_stream_calls(list(c.chat.completions.create(**kw, stream=True))),
        _openai,
        stream=True,
    ),
    Variant("openai-chat-async-stream", Chat, FakeOpenAIServer, True, _achat_stream, _async_openai, stream=True),
    Variant(
        "openai-responses",
        Responses,
        FakeOpenAIServer,
        False,
        lambda c, kw: responses_calls(c.responses.create(**kw)),
        _openai,
    ),
    Variant("openai-responses-async", Responses, FakeOpenAIServer, True, _aresponses, _async_openai),
    Variant(
        "openai-responses-stream",
        Responses,
        FakeOpenAIServer,
        False,
        lambda c, kw: responses_calls(completed(list(c.responses.create(**kw, stream=True)))),
        _openai,
        stream=True,
    ),
    Variant(
        "openai-responses-async-stream",
        Responses,
        FakeOpenAIServer,
        True,
        _aresponses_stream,
        _async_openai,
        stream=True,
    ),
    Variant(
        "anthropic", Messages, FakeAnthropic, False, lambda c, kw: messages_calls(c.messages.create(**kw)), _anthropic
    ),
    Variant("anthropic-async", Messages, FakeAnthropic, True, _amessages, _async_anthropic),
    Variant("anthropic-stream", Messages, FakeAnthropic, False, _messages_stream, _anthropic, stream=True),
    Variant("anthropic-async-stream", Messages, FakeAnthropic, True, _amessages_stream, _async_anthropic, stream=True),
    Variant(
        "litellm",
        Chat,
        FakeOpenAIServer,
        False,
        lambda c, kw: chat_calls(litellm.completion(**_litellm_kwargs(c, kw))),
        _base_url,
    ),
    Variant("litellm-async", Chat, FakeOpenAIServer, True, _alitellm, _base_url),
]


@contextmanager
def guarded(variant: Variant, client: Any, g: Guarded | None) -> Iterator[Any]:
    """``client`` as the variant guards it (``g`` None: plain)."""
    if g is None:
        yield client
    elif variant.name.startswith("litellm"):
        litellm_client.guard_litellm(guard=g.guard, inbox=g.inbox)
        try:
            yield client
        finally:
            litellm_client.unguard_litellm()
    elif variant.name.startswith("anthropic"):
        yield anthropic_client.guard_client(client, guard=g.guard, inbox=g.inbox)
    else:
        yield openai_client.guard_client(client, guard=g.guard, inbox=g.inbox)


# -- the agent: a harness loop in an agent-run span ------------------------------------------------


def execute(tracer: Tracer, call_id: str, name: str, arguments: str) -> str:
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.call.arguments": arguments,
    }
    with tracer.start_as_current_span(f"execute_tool {name}", attributes=attributes):
        return lookup_result(**json.loads(arguments))


@contextmanager
def agent_run(tracer: Tracer, name: str = "weather_agent") -> Iterator[None]:
    with tracer.start_as_current_span(
        f"invoke_agent {name}", attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
    ):
        yield


def play(variant: Variant, client: Any, tracer: Tracer, prompt: str) -> None:
    """One agent run, sync."""
    state = variant.api.start(prompt)
    with agent_run(tracer):
        for _ in range(MAX_TURNS):
            calls = variant.send(client, variant.api.kwargs(state))
            if not calls:
                return
            variant.api.record(state, calls, [execute(tracer, *call) for call in calls])
    raise AssertionError("the model never answered")


async def aplay(variant: Variant, client: Any, tracer: Tracer, prompt: str) -> None:
    """One agent run, async."""
    state = variant.api.start(prompt)
    with agent_run(tracer):
        for _ in range(MAX_TURNS):
            calls = await variant.send(client, variant.api.kwargs(state))
            if not calls:
                return
            variant.api.record(state, calls, [execute(tracer, *call) for call in calls])
    raise AssertionError("the model never answered")


@asynccontextmanager
async def closing(client: Any) -> AsyncIterator[Any]:
    try:
        yield client
    finally:
        if hasattr(client, "close"):
            await client.close()


def run_scenario(
    variant: Variant,
    server: Any,
    g: Guarded,
    guard: bool,
    prompts: Sequence[str],
    provider: TracerProvider | None = None,
) -> None:
    """The agent runs ``prompts`` concurrently (threads, or tasks) on one client, guarded or plain; its spans
    go to ``provider`` (by default a new one, with ``g``'s processors)."""
    tracer = (provider or provider_for(g)).get_tracer("harness")
    if not variant.is_async:
        client = variant.client(server)
        with guarded(variant, client, g if guard else None) as c:
            if len(prompts) == 1:
                play(variant, c, tracer, prompts[0])
            else:
                with ThreadPoolExecutor(len(prompts)) as pool:
                    for future in [pool.submit(play, variant, c, tracer, p) for p in prompts]:
                        future.result()
        if hasattr(client, "close"):
            client.close()
        return

    async def main() -> None:
        async with closing(variant.client(server)) as client:
            with guarded(variant, client, g if guard else None) as c:
                await asyncio.gather(*(aplay(variant, c, tracer, p) for p in prompts))

    asyncio.run(main())


def gentle_text(g: Guarded) -> str:
    (reminder,) = g.reminders
    assert (reminder.tool_name, reminder.run_length, reminder.tier) == ("lookup", 3, "gentle")
    text = reminder_message([reminder])
    assert text.count(GENTLE) == 1 and text.startswith("<system-reminder>\n") and text.endswith("\n</system-reminder>")
    return text


# -- the tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS, ids=str)
def test_the_fourth_request_carries_the_reminder_once_and_the_others_are_unchanged(variant: Variant) -> None:
    bodies: dict[bool, list[bytes]] = {}
    for guard in (False, True):
        g = make_guarded()
        with variant.server(REPEAT3) as server:
            run_scenario(variant, server, g, guard, [PARIS_PROMPT])
        bodies[guard] = list(server.raw)
        assert len(g.reminders) == 1
    plain, wrapped = bodies[False], bodies[True]
    assert len(plain) == len(wrapped) == 4
    assert wrapped[:3] == plain[:3]  # byte for byte
    assert b"<system-reminder>" not in b"".join(plain)
    assert json.loads(wrapped[3]) == variant.api.expected(json.loads(plain[3]), gentle_text(g))
    assert_gentle_reminder_delivered_once([variant.api.pairs(json.loads(body)) for body in wrapped])
    assert g.inbox.pending() == []


@pytest.mark.parametrize("variant", [v for v in VARIANTS if not v.stream], ids=str)
def test_a_concurrent_run_on_the_same_client_receives_nothing(variant: Variant) -> None:
    """Two runs of the same agent at once, on one guarded client: Paris repeats, Lyon calls once."""
    g = make_guarded()
    with variant.server(REPEAT3, by_prompt={"Lyon": ONE_CALL}) as server:
        run_scenario(variant, server, g, True, [PARIS_PROMPT, LYON_PROMPT])
    conversations: dict[str, list[list[tuple[str, str]]]] = {}
    for body in server.requests:
        conversations.setdefault(first_prompt(body), []).append(variant.api.pairs(body))
    assert_gentle_reminder_delivered_once(conversations[PARIS_PROMPT])
    assert len(conversations[LYON_PROMPT]) == 2
    assert_nothing_delivered(conversations[LYON_PROMPT])
    assert [r.agent_name for r in g.reminders] == ["weather_agent"]


def _delivered(server: Any, api: Any) -> int:
    return sum(text.count(GENTLE) for body in server.requests for role, text in api.pairs(body) if role == "user")


def test_guarding_a_client_twice_or_its_copy_delivers_once() -> None:
    variant = VARIANTS[0]
    g = make_guarded()
    with FakeOpenAIServer() as server:
        client = variant.client(server)
        openai_client.guard_client(client, guard=g.guard, inbox=g.inbox)
        copy = openai_client.guard_client(client, guard=g.guard, inbox=g.inbox).with_options(timeout=30)
        play(variant, copy, provider_for(g).get_tracer("harness"), PARIS_PROMPT)
    assert_gentle_reminder_delivered_once([Chat.pairs(body) for body in server.requests])
    raw = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="x")
    assert "create" not in vars(raw.chat.completions)  # only the guarded client was touched


def test_with_raw_response_goes_through_the_guard() -> None:
    variant = VARIANTS[0]
    g = make_guarded()

    def send(c: Any, kw: dict[str, Any]) -> Calls:
        return chat_calls(c.chat.completions.with_raw_response.create(**kw).parse())

    with FakeOpenAIServer() as server:
        client = variant.client(server)
        client.chat.completions.with_raw_response  # cached before guarding: rebuilt around the guard  # noqa: B018
        openai_client.guard_client(client, guard=g.guard, inbox=g.inbox)
        play(
            Variant("raw", Chat, FakeOpenAIServer, False, send, _openai),
            client,
            provider_for(g).get_tracer("h"),
            PARIS_PROMPT,
        )
    assert_gentle_reminder_delivered_once([Chat.pairs(body) for body in server.requests])


def test_a_string_input_becomes_a_user_message_before_the_reminder() -> None:
    g = make_guarded()
    tracer = provider_for(g).get_tracer("harness")
    with FakeOpenAIServer() as server:
        client = openai_client.guard_client(_openai(server), guard=g.guard, inbox=g.inbox)
        with agent_run(tracer):
            for n in range(3):
                execute(tracer, f"call_{n}", "lookup", json.dumps({"city": "Paris", "units": "metric"}))
            client.responses.create(model=MODEL, input=PARIS_PROMPT)
    (body,) = server.requests
    assert body["input"] == [{"role": "user", "content": PARIS_PROMPT}, {"role": "user", "content": gentle_text(g)}]


def test_anthropic_reminder_after_a_text_turn_is_a_new_user_message() -> None:
    messages = [{"role": "user", "content": "hi"}]
    assert anthropic_client._append_message(messages, "R") == [*messages, {"role": "user", "content": "R"}]
    results = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}]
    assert anthropic_client._append_message(results, "R") == [
        {"role": "user", "content": [*results[0]["content"], {"type": "text", "text": "R"}]}
    ]
    assert results[0]["content"] == [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]  # not mutated


@pytest.fixture
def restore_classes() -> Iterator[None]:
    originals = {(cls, n): vars(cls)[n] for cls in (Completions, AsyncCompletions) for n in ("create", "parse")}
    yield
    openai_client.disable_globally()
    anthropic_client.disable_globally()
    litellm_client.disable_globally()
    assert {(cls, n): vars(cls)[n] for cls, n in originals} == originals


@pytest.mark.usefixtures("restore_classes")
@pytest.mark.parametrize("variant", [v for v in VARIANTS if not v.stream], ids=str)
def test_enabled_globally_every_client_is_guarded_and_once_with_a_client_guard_too(variant: Variant) -> None:
    g = make_guarded()
    names = client_adapters({CLIENT_ADAPTERS_ENV: " openai, Anthropic ,litellm,openai"})
    assert names == ("openai", "anthropic", "litellm")
    assert enable_client_adapters(names, guard=g.guard, inbox=g.inbox) == list(names)
    with variant.server(REPEAT3) as server:
        run_scenario(variant, server, g, False, [PARIS_PROMPT])  # a plain client, created after
    assert_gentle_reminder_delivered_once([variant.api.pairs(body) for body in server.requests])
    g = make_guarded()
    enable_client_adapters(names, guard=g.guard, inbox=g.inbox)  # again: the new guard, still one wrapper
    with variant.server(REPEAT3) as server:
        run_scenario(variant, server, g, True, [PARIS_PROMPT])  # and a client guarded on top
    assert_gentle_reminder_delivered_once([variant.api.pairs(body) for body in server.requests])
    openai_client.disable_globally()
    anthropic_client.disable_globally()
    litellm_client.disable_globally()
    g = make_guarded()
    with variant.server(REPEAT3) as server:
        run_scenario(variant, server, g, False, [PARIS_PROMPT])
    assert _delivered(server, variant.api) == 0
    assert len(g.inbox.pending()) == 1  # nobody drained it


def test_unknown_client_adapter_names_are_refused() -> None:
    assert client_adapters({}) == ()
    with pytest.raises(
        ValueError,
        match=r"OTEL_REPEAT_GUARD_CLIENT_ADAPTERS names unknown client adapter\(s\) gemini in 'openai,gemini'",
    ):
        client_adapters({CLIENT_ADAPTERS_ENV: "openai,gemini"})


def test_a_failing_edit_leaves_the_request_unchanged(caplog: pytest.LogCaptureFixture) -> None:
    g = make_guarded()
    tracer = provider_for(g).get_tracer("harness")

    def broken(value: Any, text: str) -> Any:
        raise RuntimeError("boom")

    kwargs = {"messages": []}
    with agent_run(tracer):
        for n in range(3):
            execute(tracer, f"call_{n}", "lookup", json.dumps({"city": "Paris", "units": "metric"}))
        assert with_reminders({}, Conversation("messages", broken), Sources(g.guard, g.inbox)) == {}
        assert len(g.inbox.pending()) == 1  # no conversation to carry it: left in the inbox
        with caplog.at_level(logging.ERROR, logger="otel_repeat_guard"):
            assert with_reminders(kwargs, Conversation("messages", broken), Sources(g.guard, g.inbox)) is kwargs
        assert len(g.inbox.pending()) == 1  # given back for the run's next request
    assert "goes out unchanged, and its reminder waits for the run's next one" in caplog.text


def test_the_litellm_logger_is_a_custom_logger_with_the_deployment_hook() -> None:
    from litellm.integrations.custom_logger import CustomLogger

    g = make_guarded()
    logger = litellm_client.repeat_guard_logger(guard=g.guard, inbox=g.inbox)
    assert isinstance(logger, CustomLogger)
    assert type(logger).async_pre_call_deployment_hook is not CustomLogger.async_pre_call_deployment_hook
    assert asyncio.run(logger.async_pre_call_deployment_hook({"messages": []}, "aembedding")) is None
    assert _clients.CLIENT_ADAPTERS == ("openai", "anthropic", "litellm")


@pytest.mark.usefixtures("restore_classes")
def test_zero_code_switches_on_the_named_adapters(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``OTEL_REPEAT_GUARD_ENABLED=true`` and ``OTEL_REPEAT_GUARD_CLIENT_ADAPTERS``: a plain client made afterwards is guarded."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    from otel_repeat_guard.installed import default_inbox, installed_guard, set_installed_guard
    from otel_repeat_guard.setup import zero_code

    provider = TracerProvider()
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)  # the provider opentelemetry-instrument set up
    monkeypatch.setenv("OTEL_REPEAT_GUARD_ENABLED", "true")
    previous = set_installed_guard(None)
    try:
        monkeypatch.setenv(CLIENT_ADAPTERS_ENV, "openai,gemini")
        with caplog.at_level(logging.ERROR, logger="otel_repeat_guard"):
            zero_code.post_instrument()
        assert installed_guard() is None
        assert f"{CLIENT_ADAPTERS_ENV} names unknown client adapter(s) gemini in 'openai,gemini'" in caplog.text

        monkeypatch.setenv(CLIENT_ADAPTERS_ENV, "openai,anthropic")
        zero_code.post_instrument()
        assert installed_guard() is not None
        with FakeOpenAIServer() as server:
            play(VARIANTS[0], _openai(server), provider.get_tracer("harness"), PARIS_PROMPT)
        assert_gentle_reminder_delivered_once([Chat.pairs(body) for body in server.requests])
        assert default_inbox().pending() == []
    finally:
        set_installed_guard(previous)

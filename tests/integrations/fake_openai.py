"""A local fake OpenAI-compatible HTTP server that plays the acceptance scenario.

The real provider clients (the ``openai`` SDK, LiteLLM, and every framework built on them)
talk to it on 127.0.0.1 exactly as to the real service, so the model client and its
instrumentation run unchanged. It serves ``POST /v1/chat/completions``, streamed (SSE) or
not: a request whose conversation holds ``i`` tool results since the last real user prompt
gets ``script[i]`` as one ``tool_calls`` entry, or the final answer once the script is done
(see :func:`scenario.next_call`), reporting the usage of :func:`scenario.usage_after` (model call k of
a run: 1000·k input and 10+k output tokens). It serves ``POST /v1/responses`` (the Responses API, not
streamed) the same way: the conversation is the request's ``input`` items, each tool result a
``function_call_output``, the scripted call one ``function_call`` output item, and the usage the same
figures as ``input_tokens``/``output_tokens``. Each request body is kept, in arrival order, for tests
that check what reached the model.

Use::

    with FakeOpenAI() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="test")
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .scenario import FINAL_ANSWER, SCRIPT, next_call, usage_after

MODEL = "gpt-4o-mini"
Script = Sequence[tuple[str, dict[str, str]]]


def tool_results_since_prompt(messages: Sequence[dict[str, Any]]) -> int:
    """How many tool results follow the last user prompt that is not a ``<system-reminder>``."""
    results = 0
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        if role == "user" and "<system-reminder>" not in text:
            results = 0
        elif role in {"tool", "function"}:
            results += 1
    return results


def input_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A request's conversation as chat-shaped messages: chat completions' ``messages`` as they are, a
    Responses request's ``input`` items with each ``function_call_output`` as a ``tool`` message and each
    ``function_call`` as an assistant one (an ``input`` string is one user message)."""
    if "messages" in body or "input" not in body:
        return list(body.get("messages") or [])
    items = body["input"]
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    out: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type")
        if kind == "function_call_output":
            out.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": item.get("output")})
        elif kind == "function_call":
            out.append({"role": "assistant", "content": None, "function_call": item})
        else:  # a message item, typed or not; its content a string or a list of parts
            out.append({"role": item.get("role", ""), "content": item.get("content")})
    return out


def responses_messages(body: dict[str, Any]) -> list[tuple[str, str]]:
    """A Responses request body as (role, text) pairs, for ``assert_reminders_reached_model``: text parts
    joined, a tool result as its output, a function call as its JSON."""
    out: list[tuple[str, str]] = []
    for message in input_messages(body):
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
        if "function_call" in message:
            content = json.dumps(message["function_call"])
        out.append((message.get("role", ""), str(content or "")))
    return out


class FakeOpenAI:
    """The server; ``script_for(body)`` may be replaced to script requests another way."""

    def __init__(self, script: Script = SCRIPT, by_prompt: dict[str, Script] | None = None) -> None:
        self.script = script
        self.by_prompt = by_prompt or {}  # a conversation whose first user message holds the key follows its script
        self.requests: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def next_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}{next(self._ids):04d}"

    def tool_results(self, body: dict[str, Any]) -> int:
        """How many tool results the conversation of ``body`` holds since its prompt (the script's position)."""
        return tool_results_since_prompt(input_messages(body))

    def script_for(self, body: dict[str, Any]) -> tuple[str, dict[str, str]] | None:
        """The tool call to answer ``body`` with, or None for the final answer."""
        messages = input_messages(body)
        prompt = next((json.dumps(m.get("content")) for m in messages if m.get("role") == "user"), "")
        script = next((s for key, s in self.by_prompt.items() if key in prompt), self.script)
        return next_call(self.tool_results(body), script)

    def conversations(self) -> list[list[dict[str, Any]]]:
        """The requests of each conversation (keyed by its first user message), in arrival order."""
        by_prompt: dict[str, list[dict[str, Any]]] = {}
        for body in self.requests:
            messages = input_messages(body)
            prompt = next((json.dumps(m.get("content")) for m in messages if m.get("role") == "user"), "")
            by_prompt.setdefault(prompt, []).append(body)
        return list(by_prompt.values())

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        call = self.script_for(body)
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if call is None:
            message["content"] = FINAL_ANSWER
            finish = "stop"
        else:
            name, arguments = call
            message["tool_calls"] = [
                {
                    "id": self.next_id("call_"),
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
            ]
            finish = "tool_calls"
        return {
            "id": self.next_id("chatcmpl-"),
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body.get("model") or MODEL,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": self.usage(body),
        }

    def response(self, body: dict[str, Any]) -> dict[str, Any]:
        """The Responses API's answer to ``body``: the scripted call as one ``function_call`` item, or the answer."""
        call = self.script_for(body)
        if call is None:
            text = {"type": "output_text", "text": FINAL_ANSWER, "annotations": [], "logprobs": []}
            item: dict[str, Any] = {
                "type": "message",
                "id": self.next_id("msg_"),
                "role": "assistant",
                "status": "completed",
                "content": [text],
            }
        else:
            name, arguments = call
            item = {
                "type": "function_call",
                "id": self.next_id("fc_"),
                "call_id": self.next_id("call_"),
                "name": name,
                "arguments": json.dumps(arguments),
                "status": "completed",
            }
        tokens = usage_after(self.tool_results(body))
        return {
            "id": self.next_id("resp_"),
            "object": "response",
            "created_at": 1_700_000_000,
            "model": body.get("model") or MODEL,
            "status": "completed",
            "output": [item],
            "parallel_tool_calls": True,
            "tool_choice": body.get("tool_choice") or "auto",
            "tools": body.get("tools") or [],
            "instructions": body.get("instructions"),
            "error": None,
            "incomplete_details": None,
            "metadata": {},
            "text": {"format": {"type": "text"}},
            "usage": {
                "input_tokens": tokens["input"],
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": tokens["output"],
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": tokens["input"] + tokens["output"],
            },
        }

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        """Model call k of a run (it has seen k-1 tool results since the prompt) reports 1000·k in, 10+k out."""
        tokens = usage_after(self.tool_results(body))
        return {
            "prompt_tokens": tokens["input"],
            "completion_tokens": tokens["output"],
            "total_tokens": tokens["input"] + tokens["output"],
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._json({"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "fake"}]})
                else:
                    self._json({"error": {"message": f"no route {self.path}"}}, status=404)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(body)
                if self.path.rstrip("/").endswith("/responses"):
                    if body.get("stream"):
                        self._json({"error": {"message": "streamed /responses is not scripted"}}, status=400)
                    else:
                        self._json(server.response(body))
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._json({"error": {"message": f"no route {self.path}"}}, status=404)
                    return
                completion = server.completion(body)
                if body.get("stream"):
                    self._stream(completion, bool((body.get("stream_options") or {}).get("include_usage")))
                else:
                    self._json(completion)

            def _json(self, payload: dict[str, Any], status: int = 200) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, completion: dict[str, Any], include_usage: bool) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                message = completion["choices"][0]["message"]
                base = {k: completion[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}

                def send(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> None:
                    chunk = base | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]} | extra
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")

                send({"role": "assistant", "content": ""})
                if message.get("tool_calls"):
                    for i, call in enumerate(message["tool_calls"]):
                        send({"tool_calls": [{"index": i, **call}]})
                else:
                    send({"content": message["content"]})
                send({}, completion["choices"][0]["finish_reason"])
                if include_usage:
                    self.wfile.write(
                        b"data: " + json.dumps(base | {"choices": [], "usage": completion["usage"]}).encode() + b"\n\n"
                    )
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        return Handler

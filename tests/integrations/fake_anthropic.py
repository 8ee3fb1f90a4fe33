"""A local fake Anthropic Messages API server that plays the acceptance scenario.

The real ``anthropic`` SDK talks to it on 127.0.0.1 exactly as to the real service. It serves
``POST /v1/messages``, streamed (SSE) or not: a request whose conversation holds ``i``
``tool_result`` blocks since the last real user prompt gets ``script[i]`` as one ``tool_use``
block, or the final answer once the script is done (see :func:`scenario.next_call`). A step of
the script may be a :class:`Batch` of calls instead: one assistant message with a ``tool_use``
block for each (parallel tool calls), its results counted as that many steps. A
conversation whose first user message holds a key of ``by_prompt`` follows that script. Each
request is kept, in arrival order, parsed (``requests``) and as the bytes received (``raw``).

Use::

    with FakeAnthropic() as server:
        client = anthropic.Anthropic(base_url=server.base_url, api_key="test")
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .scenario import FINAL_ANSWER, SCRIPT, usage_after

MODEL = "claude-sonnet-4-5"
Call = tuple[str, dict[str, str]]


class Batch(tuple[Call, ...]):
    """Calls asked for in one assistant message (parallel tool calls): a step of a script, as many steps long."""

    def __new__(cls, *calls: Call) -> Batch:
        return super().__new__(cls, calls)


Script = Sequence["Call | Batch"]


def calls_after(results: int, script: Script) -> list[Call]:
    """The calls the scripted model asks for, in one message, once it has seen ``results`` tool results
    (none: the final answer). A batch takes as many results as it has calls."""
    seen = 0
    for step in script:
        calls = list(step) if isinstance(step, Batch) else [step]
        if results < seen + len(calls):
            return calls
        seen += len(calls)
    return []


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or () if isinstance(b, dict)]


def tool_results_since_prompt(messages: Sequence[dict[str, Any]]) -> int:
    """How many ``tool_result`` blocks follow the last user prompt that is not a ``<system-reminder>``."""
    results = 0
    for message in messages:
        if message.get("role") != "user":
            continue
        blocks = _blocks(message.get("content"))
        tool_results = sum(b.get("type") == "tool_result" for b in blocks)
        if tool_results:
            results += tool_results
        elif any(b.get("type") == "text" and "<system-reminder>" not in b.get("text", "") for b in blocks):
            results = 0
    return results


def first_prompt(body: dict[str, Any]) -> str:
    """The text of the conversation's first user message."""
    for message in body.get("messages") or ():
        if message.get("role") == "user":
            return "".join(b.get("text", "") for b in _blocks(message.get("content")))
    return ""


class FakeAnthropic:
    """The server; ``script_for(body)`` may be replaced to script requests another way."""

    def __init__(self, script: Script = SCRIPT, by_prompt: dict[str, Script] | None = None) -> None:
        self.script = script
        self.by_prompt = by_prompt or {}
        self.requests: list[dict[str, Any]] = []
        self.raw: list[bytes] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """The SDK's ``base_url``: it adds ``/v1/messages`` itself."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeAnthropic:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def next_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}{next(self._ids):04d}"

    def script_for(self, body: dict[str, Any]) -> list[Call]:
        """The tool calls to answer ``body`` with (one message), or none for the final answer."""
        prompt = first_prompt(body)
        script = next((s for key, s in self.by_prompt.items() if key in prompt), self.script)
        return calls_after(tool_results_since_prompt(body.get("messages") or []), script)

    def conversations(self) -> dict[str, list[dict[str, Any]]]:
        """The requests of each conversation, keyed by its first user message, in arrival order."""
        out: dict[str, list[dict[str, Any]]] = {}
        for body in self.requests:
            out.setdefault(first_prompt(body), []).append(body)
        return out

    def message(self, body: dict[str, Any]) -> dict[str, Any]:
        calls = self.script_for(body)
        content: list[dict[str, Any]] = [
            {"type": "tool_use", "id": self.next_id("toolu_"), "name": name, "input": dict(arguments)}
            for name, arguments in calls
        ]
        stop = "tool_use" if calls else "end_turn"
        if not calls:
            content = [{"type": "text", "text": FINAL_ANSWER}]
        return {
            "id": self.next_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or MODEL,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": self.usage(body),
        }

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        """Model call k of a run (it has seen k-1 tool results since the prompt) reports 1000·k in, 10+k out."""
        tokens = usage_after(tool_results_since_prompt(body.get("messages") or []))
        return {"input_tokens": tokens["input"], "output_tokens": tokens["output"]}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw or b"{}")
                with server._lock:
                    server.raw.append(raw)
                    server.requests.append(body)
                if not self.path.split("?")[0].rstrip("/").endswith("/v1/messages"):
                    self._json({"type": "error", "error": {"type": "not_found_error", "message": self.path}}, 404)
                    return
                message = server.message(body)
                if body.get("stream"):
                    self._stream(message)
                else:
                    self._json(message)

            def _json(self, payload: dict[str, Any], status: int = 200) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, message: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()

                def send(event: str, data: dict[str, Any]) -> None:
                    self.wfile.write(f"event: {event}\ndata: {json.dumps({'type': event, **data})}\n\n".encode())

                head = {
                    **message,
                    "content": [],
                    "stop_reason": None,
                    "usage": {**message["usage"], "output_tokens": 1},
                }
                send("message_start", {"message": head})
                for index, block in enumerate(message["content"]):
                    if block["type"] == "tool_use":
                        send("content_block_start", {"index": index, "content_block": {**block, "input": {}}})
                        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
                    else:
                        send("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}})
                        delta = {"type": "text_delta", "text": block["text"]}
                    send("content_block_delta", {"index": index, "delta": delta})
                    send("content_block_stop", {"index": index})
                send(
                    "message_delta",
                    {
                        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                        "usage": {"output_tokens": message["usage"]["output_tokens"]},
                    },
                )
                send("message_stop", {})
                self.wfile.flush()
                self.close_connection = True

        return Handler

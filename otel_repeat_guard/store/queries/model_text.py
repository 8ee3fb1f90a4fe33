"""What a model said, from the output the store keeps: the text of its messages, not their JSON envelope.

Instrumentations record a model's output in their own shapes: GenAI's ``gen_ai.output.messages``
(``[{"role": "assistant", "parts": [{"type": "text", "content": ...}]}]``), OpenInference's
``output.value`` as LangChain's ``LLMResult`` (``{"generations": [[{"text": ..., "message": ...}]]}``) or
an OpenAI response (``{"choices": [{"message": {"content": ...}}]}``), OpenLLMetry's plain text. The page
shows the text parts, and each tool call the model asked for as ``→ name {arguments}``. A preview the
store cut short (``… [N more characters omitted]``) is no longer valid JSON: its text is read up to
the cut, and ends with "…". Output in no shape known here is shown as stored.
"""

from __future__ import annotations

import json
import re
from typing import Any

_CUT = re.compile(r"… \[\d+ more characters omitted\]$")
# A string value of a text-bearing key, possibly cut short at the end of the preview.
_TEXT_VALUE = re.compile(r'"(?:content|text)"\s*:\s*"((?:[^"\\]|\\.)*)("|\\?$)')
_TOOL_NAME = re.compile(r'"type"\s*:\s*"tool_call"[^{}]*?"name"\s*:\s*"((?:[^"\\]|\\.)*)"')


def model_text(stored: str) -> str:
    """The text a model call's stored output says, for a person to read (see the module's docstring)."""
    body = _CUT.sub("", stored)
    cut = body != stored
    if not body.lstrip().startswith(("[", "{")):
        return stored
    try:
        value = json.loads(body)
    except ValueError:
        return _partial(body) or stored if cut else stored
    said = _said(value)
    if said is None:
        return stored
    text = "\n".join(said)
    return text + "…" if cut else text


def _partial(body: str) -> str:
    """The text values of an envelope cut short, in order; the last one may itself be cut."""
    said = []
    for match in _TEXT_VALUE.finditer(body):
        raw = match.group(1)
        try:
            said.append(json.loads(f'"{raw}"'))
        except ValueError:
            said.append(raw)
    said += [f"→ {name}" for name in _TOOL_NAME.findall(body)] if not said else []
    return "\n".join(s for s in said if s) + "…" if any(said) else ""


def _arguments(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _call(name: Any, arguments: Any) -> str:
    return f"→ {name} {_arguments(arguments)}"


def _said(value: Any) -> list[str] | None:
    """The texts and tool calls of an output in a known shape; None when the shape is not one."""
    if isinstance(value, list):
        parts = [_said(item) for item in value]
        if not value or any(part is None for part in parts):
            return None
        return [text for part in parts if part for text in part]
    return _said_one(value) if isinstance(value, dict) else None


def _said_one(value: dict[str, Any]) -> list[str] | None:
    if isinstance(value.get("parts"), list):  # a GenAI message
        return _genai_parts(value["parts"])
    inner = _inner(value)
    if inner is not None:
        return _said(inner)
    if isinstance(value.get("kwargs"), dict):  # a LangChain message, serialized
        return _message(value["kwargs"])
    if "content" in value or "tool_calls" in value:  # a chat message
        return _message(value)
    return None


def _inner(value: dict[str, Any]) -> Any:
    """What a wrapper holds: LangChain's generations, an OpenAI completion's messages, a generation's
    text or message; None for no wrapper."""
    if isinstance(value.get("generations"), list):  # LangChain's LLMResult
        return [g for group in value["generations"] for g in (group if isinstance(group, list) else [group])]
    if isinstance(value.get("choices"), list):  # an OpenAI chat completion
        return [c.get("message", {}) if isinstance(c, dict) else c for c in value["choices"]]
    if "text" in value and ("message" in value or "generation_info" in value):  # a LangChain generation
        text = value.get("text")
        return {"content": text} if isinstance(text, str) and text else value.get("message") or {}
    return None


def _genai_parts(parts: list[Any]) -> list[str]:
    said = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("content"), str):
            said.append(part["content"])
        elif kind == "tool_call":
            said.append(_call(part.get("name", "?"), part.get("arguments", {})))
    return said


def _message(message: dict[str, Any]) -> list[str]:
    said = []
    content = message.get("content")
    if isinstance(content, str) and content:
        said.append(content)
    elif isinstance(content, list):
        said += [b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str) and b["text"]]
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict):
            continue
        function: dict[str, Any] = call["function"] if isinstance(call.get("function"), dict) else call
        said.append(_call(function.get("name", "?"), function.get("arguments", function.get("args", {}))))
    return said

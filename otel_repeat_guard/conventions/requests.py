"""Reading the tool calls a model asked for off its model-call span, in each vocabulary.

Some runtimes record a tool span without the call's arguments (AutoGen, Semantic Kernel,
MCP), and some run tools with no span at all (CrewAI under OpenLLMetry, Haystack). The
model client's span still says what the model requested: call id, tool name and arguments.
The instrumentations set these attributes when the model-call span ends, and only with
content capture on. Model-call spans are a few per agent step, so these readers may parse.

A bad value costs only itself: a message, part or call of the wrong type (``"parts": 5``, a part
that is a number) is skipped and its siblings are read; a number no float or int holds is kept
exactly (:func:`~otel_repeat_guard.core.canonical.parse_exactly`), never failing the whole text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from otel_repeat_guard.conventions.base import MISSING, EventLike, RequestedCall, event_name, str_or_none
from otel_repeat_guard.core.canonical import parse_exactly

_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"


def parsed(value: Any) -> Any:
    """A JSON text parsed, anything else as it is; None for text that does not parse (or nests too deep)."""
    if isinstance(value, (str, bytes)):
        try:
            return parse_exactly(value)
        except (ValueError, RecursionError):
            return None
    return value


def _parts(value: Any) -> Sequence[Any]:
    """A message's ``parts``: a JSON array (or a tuple, as before); nothing for any other value (``"parts": 5``)."""
    return value if isinstance(value, (list, tuple)) else ()


def _request(call_id: Any, name: Any, arguments: Any) -> RequestedCall | None:
    tool = str_or_none(name)
    if tool is None:
        return None
    return RequestedCall(str_or_none(call_id), tool, MISSING if arguments is None else arguments)


def _openai_tool_calls(calls: Any) -> Iterable[RequestedCall]:
    """Chat-completions ``tool_calls``: ``[{id, type: function, function: {name, arguments}}]``."""
    for call in calls if isinstance(calls, list) else ():
        if isinstance(call, Mapping):
            function = call.get("function")
            function = function if isinstance(function, Mapping) else call
            request = _request(call.get("id"), function.get("name"), function.get("arguments"))
            if request is not None:
                yield request


def gen_ai_output_messages(attributes: Mapping[str, Any]) -> list[RequestedCall]:
    """``gen_ai.output.messages`` (GenAI's latest conventions, OpenLLMetry 0.62+): parts of ``type`` ``tool_call``."""
    raw = attributes.get(_OUTPUT_MESSAGES)
    if isinstance(raw, str) and "tool_call" not in raw:
        return []  # a text answer: nothing to parse
    messages = parsed(raw)
    out: list[RequestedCall] = []
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, Mapping):
            continue
        for part in _parts(message.get("parts")):
            if isinstance(part, Mapping) and part.get("type") == "tool_call":
                request = _request(part.get("id"), part.get("name"), part.get("arguments"))
                if request is not None:
                    out.append(request)
        out.extend(_openai_tool_calls(message.get("tool_calls")))
    return out


def gen_ai_choice_events(events: Sequence[EventLike]) -> list[RequestedCall]:
    """The older GenAI ``gen_ai.choice`` span events: ``tool_calls`` on the event, or in its ``message``."""
    out: list[RequestedCall] = []
    for event in events:
        if event_name(event) != "gen_ai.choice":
            continue
        attributes = event.attributes or {}
        calls = parsed(attributes.get("tool_calls"))
        if calls is None:
            message = parsed(attributes.get("message"))
            calls = message.get("tool_calls") if isinstance(message, Mapping) else None
        out.extend(_openai_tool_calls(parsed(calls)))
    return out


def flattened(attributes: Mapping[str, Any], pattern: re.Pattern[str]) -> list[dict[str, Any]]:
    """Records spelt out one attribute per field, ``<prefix>.{i}…<field>``: ``pattern``'s groups are the
    indices and then the field; one dict of fields per record, in index order."""
    found: dict[tuple[int, ...], dict[str, Any]] = {}
    pairs: Iterable[tuple[object, Any]] = attributes.items()  # compiled, a key that is no str is checked here
    for key, value in pairs:
        match = pattern.fullmatch(key) if isinstance(key, str) else None
        if match is None:
            continue
        groups = match.groups()
        try:
            index = tuple(int(group) for group in groups[:-1])
        except ValueError:  # an index past Python's 4,300-digit conversion limit: no message's
            continue
        found.setdefault(index, {})[groups[-1]] = value
    return [fields for _, fields in sorted(found.items())]


def _flattened(attributes: Mapping[str, Any], pattern: re.Pattern[str], fields: Sequence[str]) -> list[RequestedCall]:
    """Tool calls spelt out one attribute per field, ``<prefix>.{i}.<…>.{j}.<field>``, in (i, j) order."""
    out: list[RequestedCall] = []
    for call in flattened(attributes, pattern):
        request = _request(*(call.get(field) for field in fields))
        if request is not None:
            out.append(request)
    return out


_OPENINFERENCE: Final = re.compile(
    r"llm\.output_messages\.(\d+)\.message\.tool_calls\.(\d+)\.tool_call\.(id|function\.name|function\.arguments)"
)
_TRACELOOP: Final = re.compile(r"gen_ai\.completion\.(\d+)\.tool_calls\.(\d+)\.(id|name|arguments)")


def openinference_output_messages(attributes: Mapping[str, Any]) -> list[RequestedCall]:
    """OpenInference: ``llm.output_messages.{i}.message.tool_calls.{j}.tool_call.{id,function.name,function.arguments}``."""
    return _flattened(attributes, _OPENINFERENCE, ("id", "function.name", "function.arguments"))


def traceloop_completions(attributes: Mapping[str, Any]) -> list[RequestedCall]:
    """OpenLLMetry before 0.62: ``gen_ai.completion.{i}.tool_calls.{j}.{id,name,arguments}``."""
    return _flattened(attributes, _TRACELOOP, ("id", "name", "arguments"))


def gen_ai_requests(attributes: Mapping[str, Any], events: Sequence[EventLike]) -> list[RequestedCall]:
    """What a GenAI-vocabulary model span requested: the messages attribute, else the choice events."""
    if _OUTPUT_MESSAGES in attributes:
        return gen_ai_output_messages(attributes)
    return gen_ai_choice_events(events) if len(events) else []

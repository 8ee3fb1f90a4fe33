"""``otel-repeat-guard claude-code-hook``: the guard as a Claude Code command hook (docs/claude-code.md).

Claude Code starts the command once per hook event, with the event's JSON on stdin:

- **PostToolUse**, **PostToolUseFailure**, **PermissionDenied**: the call is counted by a guard in this
  process, as a GenAI ``execute_tool`` span (the chain key ``claude:<session_id>``, with ``/<agent_id>``
  inside a subagent, ``%`` and ``/`` inside an id percent-encoded); the reminders due are printed as the hook's
  JSON answer,
  ``{"hookSpecificOutput": {"hookEventName": ..., "additionalContext": ...}}``. The span is exported
  over OTLP when the environment configures it (``OTEL_EXPORTER_OTLP_ENDPOINT``,
  ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_TRACES_EXPORTER``), else written to the embedded store
  (``$OTEL_REPEAT_GUARD_DB``, else ``repeat-guard.db`` in the session's directory), which the dashboard reads.
- **UserPromptSubmit** starts the session's chain afresh; **SubagentStop** drops the subagent's chain,
  **SessionEnd** every chain of the session.
- **PreToolUse** and **Stop** (optional): a call its permissions refuse gets no hook after PreToolUse, so
  with these two each call is open from its PreToolUse until it counts: answered, refused (the session's
  transcript holds its result and no PostToolUse came) or the turn over, the calls of one message in the
  order Claude asked for them however they finish (:mod:`~otel_repeat_guard.integrations._claude_calls`;
  SQLite only: in Redis each call counts as it is answered, and refused calls are not counted).

Between calls the chain lives outside the process (:mod:`otel_repeat_guard.integrations._claude_state`):
in Redis when ``OTEL_REPEAT_GUARD_STORE`` names one (the guard's shared chain store, one script per call),
else in SQLite beside the store (``repeat-guard.chains.db``), read and written inside one ``BEGIN
IMMEDIATE`` transaction, so concurrent hook processes of one session count each call once.

The guard's configuration is ``OTEL_REPEAT_GUARD_*`` (defaults: reminders at 3, 5 and 8), with ``TodoWrite``
added to the exclusions unless ``OTEL_REPEAT_GUARD_EXCLUDE`` is set. The command **always exits 0**: Claude
Code reads exit code 2 from a UserPromptSubmit hook as "block this prompt", so whatever goes wrong is one
line on stderr and the prompt and the tool go on.
"""

from __future__ import annotations

import dataclasses
import json
import json.scanner
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from otel_repeat_guard.cli.sdk_limits import sdk_limit_problem
from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.core.sources import ENV_PREFIX
from otel_repeat_guard.integrations._claude import (
    DEFAULT_EXCLUDE,
    TOOL_EVENTS,
    Exclusions,
    answer,
    chain_key,
    session_prefix,
)
from otel_repeat_guard.integrations._claude_rows import OTLP_VARIABLES, RowDecider, needs_spans, to_collector
from otel_repeat_guard.store.rows import ToolCallRow

if TYPE_CHECKING:
    import logging

    from otel_repeat_guard.integrations._claude_deciders import Deciders

PROGRAM = "otel-repeat-guard claude-code-hook"
__all__ = ["OTLP_VARIABLES", "handle", "main"]
TURN_ENDS = ("Stop", "SubagentStop", "UserPromptSubmit")
ANSWERED = ("PostToolUse", "PostToolUseFailure")


HOOK_STORE_TIMEOUT_MS = 500
"""The Redis timeout of a hook process unless the command sets one: each process connects afresh, and concurrent
hook processes (parallel tool calls) on a busy machine took more than the guard's 50 ms to."""


def hook_config(environ: Mapping[str, str]) -> GuardConfig:
    """``OTEL_REPEAT_GUARD_*``, with ``TodoWrite`` excluded unless the exclusions are set there, and a Redis
    timeout for a process that connects once (:data:`HOOK_STORE_TIMEOUT_MS`) unless one is set there."""
    config = GuardConfig.from_env(environ)
    if config.shared_store and (ENV_PREFIX + "STORE_TIMEOUT_MS") not in environ:
        config = dataclasses.replace(config, store_timeout_ms=HOOK_STORE_TIMEOUT_MS)
    if (ENV_PREFIX + "EXCLUDE") in environ:
        return config
    return dataclasses.replace(config, exclude=(*config.exclude, *DEFAULT_EXCLUDE))


def store_path(hook_input: Mapping[str, Any], environ: Mapping[str, str]) -> str:
    """``$OTEL_REPEAT_GUARD_DB``, else ``repeat-guard.db`` in the session's directory (the input's ``cwd``), as
    ``str(pathlib.Path(...))`` gives it (without importing :mod:`pathlib`: :mod:`otel_repeat_guard.store.path_text`)."""
    from otel_repeat_guard.store.path_text import joined, path_text
    from otel_repeat_guard.store.schema import DB_ENV, DEFAULT_DB

    configured = environ.get(DB_ENV)
    if configured:
        return path_text(configured)
    return joined(str(hook_input.get("cwd") or "."), DEFAULT_DB)


def deciders(config: GuardConfig, environ: Mapping[str, str]) -> Deciders:
    """What decides this call: the fast path's rows, or, where spans are needed (:func:`needs_spans`), a guard on
    spans (then the whole package is loaded: the span path imports OpenTelemetry anyway)."""
    if not needs_spans(config, environ):
        return lambda config, session_id: RowDecider(config, session_id, environ)
    problem = sdk_limit_problem(environ)  # the SDK would refuse it at its import, in words that say less
    if problem is not None:
        raise ValueError(problem)
    whole_package()
    from otel_repeat_guard.integrations._claude_deciders import SpanDecider

    return SpanDecider


def handle(hook_input: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """The hook's answer to one event (``{}`` for none)."""
    from otel_repeat_guard.integrations._claude_deciders import Counted
    from otel_repeat_guard.integrations._claude_state import chain_state, wait_for_refusals

    event = str(hook_input.get("hook_event_name") or "")
    if not event:
        raise ValueError("the event has no hook_event_name")
    if event not in TOOL_EVENTS and event not in TURN_ENDS and event not in ("PreToolUse", "SessionEnd"):
        return {}
    if (event in TOOL_EVENTS or event == "PreToolUse") and not hook_input.get("tool_name"):
        raise ValueError(f"the {event} event has no tool_name")
    config = hook_config(environ)
    key = chain_key(hook_input)
    excluded = Exclusions(config.exclude).excluded(str(hook_input.get("tool_name") or ""))
    counted = Counted([], [])
    decider = deciders(config, environ)
    wait_for_refusals(config, store_path(hook_input, environ), key, hook_input)
    with chain_state(config, store_path(hook_input, environ), decider) as state:
        if event == "PreToolUse":
            if not excluded:
                state.opened(key, hook_input)
        elif event == "SessionEnd":
            state.drop_session(session_prefix(str(hook_input.get("session_id") or "unknown")))
        elif event in TURN_ENDS:
            if event != "SubagentStop" or hook_input.get("agent_id"):
                counted = state.settle(key)  # the turn's calls that nothing answered were denied
                if event != "Stop":
                    state.drop([key])
        elif not excluded:
            counted = state.count(hook_input, key)
    if counted.spans:
        work = Export(counted.spans, hook_input, environ, config)
        problem = collector_exporters(work) or export_within(EXPORT_WAIT_S, work)
        if problem is not None:  # the chain has counted the call: its reminder is due all the same
            print(f"{PROGRAM}: the call is counted, but {problem}", file=sys.stderr)
    return answer(event, counted.reminders) if event in ANSWERED else {}


EXPORT_WAIT_S = 0.5
"""The longest a hook call waits for its spans to reach the store or the collector: past it, they are dropped
(and counted, in one line), so a store locked by another process, or a collector that refuses or never
answers, costs a call at most this much."""


class Export:
    """What one hook call exports: its spans, and where to (the event, the environment, the guard's config). A plain
    class: a dataclass's definition cost each hook call about a fiftieth of it."""

    __slots__ = ("config", "environ", "exporters", "failed", "hook_input", "refused", "said", "spans")

    def __init__(
        self, spans: Sequence[Any], hook_input: Mapping[str, Any], environ: Mapping[str, str], config: GuardConfig
    ) -> None:
        self.spans = spans
        self.hook_input = hook_input
        self.environ = environ
        self.config = config
        self.said: list[str] = []
        """What the exporters logged meanwhile (their thread's records), for the one line said of a failure."""
        self.failed: BaseException | None = None
        self.refused = 0
        """Exporters whose export failed (each logs why: the first such record is the line said)."""
        self.exporters: list[Any] | None = None
        """The collector's exporters, made before the bounded wait (:func:`collector_exporters`); None: the store's."""


class _ExportWords:
    """Keeps the records of the export thread from stderr: the hook says what became of the spans in one line.
    (A filter of :mod:`logging`'s handlers, which take any object with this ``filter`` method.)"""

    def __init__(self, export: Export) -> None:
        self._export = export

    def filter(self, record: logging.LogRecord) -> bool:
        if record.threadName != EXPORT_THREAD:
            return True
        self._export.said.append(record.getMessage().splitlines()[0] if record.getMessage() else record.levelname)
        return False


EXPORT_THREAD = "otel-repeat-guard-claude-code-hook-export"


def export_within(seconds: float, work: Export) -> str | None:
    """Export ``work``'s spans (:func:`export`) in a daemon thread, waiting at most ``seconds``; what went wrong
    (to say after "the call is counted, but"), or None. A thread still waiting is left behind: the process ends
    with the call, and the spans are dropped."""
    words, stderr = _ExportWords(work), _last_resort(work)
    if stderr is not None:
        stderr.addFilter(words)
    thread = threading.Thread(target=_export_in_thread, args=(work,), name=EXPORT_THREAD, daemon=True)
    thread.start()
    thread.join(seconds)
    if stderr is not None and not thread.is_alive():
        stderr.removeFilter(words)
    many = len(work.spans) != 1
    spans = f"{len(work.spans)} span{'s' if many else ''}"
    target = "the collector" if to_collector(work.environ) else f"the store {store_path(work.hook_input, work.environ)}"
    if thread.is_alive():
        return f"{spans} did not reach {target} within {seconds:g} s: {'they were' if many else 'it was'} dropped"
    if work.failed is not None:
        error = work.failed
        said = str(error).splitlines()[0] if str(error) else ""
        return f"not stored: {type(error).__name__}: {said}"
    if work.refused:
        return f"{spans} did not reach {target}: {work.said[0] if work.said else 'its exporter failed'}"
    return None


def _last_resort(work: Export) -> logging.Handler | None:
    """Where a record goes in a hook process (no handler is set): :data:`logging.lastResort`. Not imported for the
    fast path's rows (nothing on their way to the store logs) unless a part of this call has imported it already."""
    if "logging" not in sys.modules and _rows(work):
        return None
    import logging

    return logging.lastResort


def _rows(work: Export) -> bool:
    """Whether ``work`` is the fast path's store rows, not spans."""
    return bool(work.spans) and isinstance(work.spans[0], ToolCallRow)


def _export_in_thread(work: Export) -> None:
    try:
        export(work)
    except BaseException as error:
        work.failed = error


def export(work: Export) -> None:
    """Send the call's span over OTLP when the environment configures it, else into the embedded store; a failed
    export is in ``work.failed`` or the exporters' logged words."""
    if _rows(work):  # the fast path's store rows: no spans
        write_rows(store_path(work.hook_input, work.environ), work.spans)
        return
    if work.exporters is not None:
        exporters = work.exporters
    else:
        from otel_repeat_guard.store import SQLiteSpanExporter

        exporters = [SQLiteSpanExporter(store_path(work.hook_input, work.environ), config=work.config)]
    for exporter in exporters:
        try:
            if exporter.export(work.spans).name != "SUCCESS":
                work.refused += 1
        finally:
            exporter.shutdown()


def collector_exporters(work: Export) -> str | None:
    """With a collector configured, its exporters, made here, before the bounded wait: the wait is for the network
    (a collector down or silent), while loading an OTLP exporter's libraries took more than the whole wait on a
    loaded machine, dropping spans a healthy collector would have taken. What went wrong, to say, or None."""
    if not to_collector(work.environ):
        return None
    from otel_repeat_guard.setup.configure import span_exporters

    try:
        work.exporters = list(span_exporters(work.environ))
    except Exception as error:  # a bad exporter setting: said in one line; the call is counted and answered
        said = str(error).splitlines()[0] if str(error) else ""
        return f"{len(work.spans)} span(s) not exported: {type(error).__name__}: {said}"
    return None


def write_rows(path: str, rows: Sequence[ToolCallRow]) -> None:
    """The fast path's rows into the store at ``path``, in the span exporter's own transaction."""
    from otel_repeat_guard.store.batch import Batch, write_batch
    from otel_repeat_guard.store.origin import written_by_another
    from otel_repeat_guard.store.schema import open_for_writing

    conn = open_for_writing(path)
    try:
        write_batch(conn, Batch(calls=list(rows)), written_by_another)
    finally:
        conn.close()


def whole_package() -> None:
    """Run the package's ``__init__`` if the command's entry (``otel_repeat_guard_hook``) left it for later: the span
    path imports OpenTelemetry and the processor anyway, and with them any part may use the package's names."""
    package = sys.modules.get("otel_repeat_guard")
    spec = getattr(package, "__spec__", None)
    if package is not None and not hasattr(package, "__version__") and spec is not None and spec.loader is not None:
        spec.loader.exec_module(package)


MAX_DEPTH = 100_000
"""The deepest nesting of an event read at all: past it, the event is skipped (and said so)."""


def read_event(data: bytes) -> Any:
    """A hook event, as Node's ``JSON.stringify`` wrote it: output cut inside a character is a lone surrogate
    escape, which orjson refuses (the stdlib reads it), and a deep value past orjson's and the stdlib's
    nesting limits is read by the stdlib's Python scanner, whose recursion is Python's own frames. An event
    left unread would let the next call extend the run this one broke."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(data)
    except RecursionError:
        pass
    depth = data.count(b"[") + data.count(b"{")  # at least as deep as it is
    if depth > MAX_DEPTH:
        raise ValueError(f"the event nests past {MAX_DEPTH:,} levels") from None
    decoder = json.JSONDecoder()
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + 4 * depth)  # each level is two calls of the scanner: kept with room
    try:
        return decoder.decode(data.decode("utf-8", "surrogatepass"))
    finally:
        sys.setrecursionlimit(limit)


USAGE = (
    f"usage: {PROGRAM} < EVENT.json\n"
    "Claude Code runs this as a command hook, with one hook event's JSON on stdin; it prints the reminder due,\n"
    "if any, as the hook's JSON answer, and always exits 0. It takes no options. See docs/claude-code.md."
)


def main(argv: Sequence[str] | None = None) -> int:
    """Read one hook event from stdin, print the answer; always 0 (errors go to stderr, one line). Claude Code
    passes no arguments: any (``--help``), or a terminal on stdin, is a person, who gets the usage, not a wait."""
    words = sys.argv[1:] if argv is None else list(argv)
    if words or sys.stdin is None or sys.stdin.isatty():
        print(USAGE, file=sys.stdout if words[:1] in (["-h"], ["--help"]) else sys.stderr)
        return 0
    try:
        hook_input = read_event(sys.stdin.buffer.read() or b"{}")
        if not isinstance(hook_input, dict):
            raise ValueError(f"the hook input must be a JSON object, got {type(hook_input).__name__}")
        output = handle(hook_input, os.environ)
        if output:
            try:
                text = orjson.dumps(output).decode()
            except TypeError:  # a lone surrogate quoted from the call: escaped, as Node's JSON.stringify does
                text = json.dumps(output)
            sys.stdout.write(text + "\n")
            sys.stdout.flush()
    except BaseException as error:  # a hook must never block Claude Code, whatever happened
        message = str(error).splitlines()[0] if str(error) else ""
        print(f"{PROGRAM}: {type(error).__name__}: {message} (the guard skipped this event)", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

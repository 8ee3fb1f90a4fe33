"""The console scripts' entry points (``otel-repeat-guard``, ``otel-repeat-guard-claude-code-hook``), outside the
package on purpose.

A console script imports its module, and any module inside ``otel_repeat_guard`` runs the package's ``__init__``
first, which imports the span processor and with it the OpenTelemetry SDK: about 0.15 s of a Claude Code hook that
needs none of it on its fast path, and a traceback before ``main`` when the SDK refuses an ``OTEL_*`` span limit at
its import. So each entry here registers the package without running its ``__init__`` (the module its spec makes,
not executed: the subpackages import as usual), checks the SDK's span limits (one line naming a bad one), and only
then loads what the command needs; the commands that need the package's names run its ``__init__`` in that same
module object (``whole_package``). The package's ``__init__`` is not compiled in either build (pyproject's
``interpreted`` list), so its spec's loader runs it as any Python source.
"""

from __future__ import annotations

import _thread
import contextlib
import gc
import importlib.util
import os
import sys
import types
from collections.abc import Sequence
from typing import Any, NoReturn

PACKAGE = "otel_repeat_guard"


def _package_without_init() -> None:
    """``otel_repeat_guard`` in ``sys.modules``, its ``__init__`` not run yet (nothing when it is imported already)."""
    if PACKAGE in sys.modules:
        return
    spec = importlib.util.find_spec(PACKAGE)
    if spec is not None and spec.loader is not None and spec.submodule_search_locations is not None:
        sys.modules[PACKAGE] = importlib.util.module_from_spec(spec)


def defer_inspect() -> None:
    """Leave :mod:`inspect` unloaded until something reads one of its names (nothing when it is imported already).

    :mod:`dataclasses` imports ``inspect`` (and with it ``ast``, ``dis``, ``tokenize``, ``linecache``): 7 ms of a
    hook call's 66, for one use, ``inspect.signature``, which only a dataclass without a docstring reaches. So
    ``sys.modules`` gets a stand-in carrying inspect's own spec, whose module ``__getattr__`` (PEP 562) imports
    the real module on the first name read, ``from inspect import x`` included, and hands that read and every later
    one to it. Once loaded, ``sys.modules`` holds the real module; the stand-in leaves it only while it is still
    there itself, under a lock, so it never removes a real one. Not :class:`importlib.util.LazyLoader`: the
    ``import`` statement reads the module's ``__spec__``, and a lazy module loads on any attribute read."""
    if "inspect" in sys.modules:
        return
    spec = importlib.util.find_spec("inspect")
    if spec is None:  # pragma: no cover - the standard library's own module
        return
    stand_in = types.ModuleType("inspect")
    stand_in.__spec__, stand_in.__loader__, stand_in.__package__ = spec, spec.loader, spec.parent  # as the real's
    lock = _thread.RLock()

    def real_name(name: str) -> Any:
        with lock:
            if sys.modules.get("inspect") is stand_in:
                del sys.modules["inspect"]
            import inspect
        return getattr(inspect, name)

    stand_in.__getattr__ = real_name  # type: ignore[method-assign]
    sys.modules["inspect"] = stand_in


def claude_code_hook(argv: Sequence[str] | None = None) -> NoReturn:
    """``otel-repeat-guard-claude-code-hook``: one Claude Code hook event, always exit 0 (docs/claude-code.md).

    The process ends here, its output flushed, without the interpreter's finalization (``os._exit``): tearing down
    the modules a call loaded cost a fifth of the call. Nothing is left to it: the chains' transaction is committed
    or rolled back, the store's write done or, past its bound, abandoned as a daemon thread is at any exit. The
    process is the hook's own, so it may leave :mod:`inspect` for later (:func:`defer_inspect`), and it runs
    without the cyclic garbage collector: one event allocates a few megabytes, mostly the imports' objects, which
    live to the end anyway, and the collector's passes over them cost 2-3 ms of a 50 ms call (the memory goes back
    at the exit)."""
    gc.disable()
    defer_inspect()
    _package_without_init()
    from otel_repeat_guard.cli.claude_code_hook import main as hook

    code = hook(argv)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a reader gone (a closed pipe): nothing more to say to it
            stream.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """``otel-repeat-guard``: the command line (``claude-code-hook`` as above, without loading the rest)."""
    words = sys.argv[1:] if argv is None else list(argv)
    if words[:1] == ["claude-code-hook"]:
        claude_code_hook(words[1:])
    _package_without_init()
    from otel_repeat_guard.cli.sdk_limits import sdk_limit_problem

    problem = sdk_limit_problem(os.environ)
    if problem is not None:
        print(f"otel-repeat-guard: {problem}", file=sys.stderr)
        return 2
    from otel_repeat_guard.cli.claude_code_hook import whole_package

    whole_package()
    from otel_repeat_guard.cli.main import main as command

    return command(words)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

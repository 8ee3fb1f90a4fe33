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

import contextlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

PACKAGE = "otel_repeat_guard"


def _package_without_init() -> None:
    """``otel_repeat_guard`` in ``sys.modules``, its ``__init__`` not run yet (nothing when it is imported already)."""
    if PACKAGE in sys.modules:
        return
    spec = importlib.util.find_spec(PACKAGE)
    if spec is not None and spec.loader is not None and spec.submodule_search_locations is not None:
        sys.modules[PACKAGE] = importlib.util.module_from_spec(spec)


def claude_code_hook(argv: Sequence[str] | None = None) -> NoReturn:
    """``otel-repeat-guard-claude-code-hook``: one Claude Code hook event, always exit 0 (docs/claude-code.md).

    The process ends here, its output flushed, without the interpreter's finalization (``os._exit``): tearing down
    the modules a call loaded cost a fifth of the call. Nothing is left to it: the chains' transaction is committed
    or rolled back, the store's write done or, past its bound, abandoned as a daemon thread is at any exit."""
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

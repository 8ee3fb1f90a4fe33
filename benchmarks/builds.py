"""Which build of otel_repeat_guard a benchmark imports: the pure-Python source or the compiled wheel.

``python -m benchmarks --build compiled`` (or ``OTEL_REPEAT_GUARD_BENCH_BUILD=compiled`` for any
``python -m benchmarks.…``) must run in an environment with the compiled wheel installed, e.g.
``.venv-compiled``: the checkout then goes last on ``sys.path``, so ``import otel_repeat_guard``
finds the wheel, not the sources beside ``benchmarks/``. ``--build pure`` puts the checkout first:
the same sources, interpreted, in any environment. The variable is inherited, so the valgrind
children of ``benchmarks.instructions`` import the same build.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ENV = "OTEL_REPEAT_GUARD_BENCH_BUILD"
BUILDS = ("pure", "compiled")
ROOT = Path(__file__).resolve().parents[1]


def _is_checkout(entry: str) -> bool:
    try:
        return Path(entry or os.getcwd()).resolve() == ROOT
    except OSError:
        return False


def select(build: str | None = None) -> str | None:
    """Arrange ``sys.path`` for ``build`` (default: the environment variable), before the package is imported."""
    build = build or os.environ.get(ENV) or None
    if build is None:
        return None
    if build not in BUILDS:
        raise SystemExit(f"{ENV}={build!r}: expected one of {', '.join(BUILDS)}")
    if "otel_repeat_guard" in sys.modules:
        raise SystemExit(f"the {build} build was asked for after otel_repeat_guard was imported")
    os.environ[ENV] = build
    checkout = [entry for entry in sys.path if _is_checkout(entry)]
    rest = [entry for entry in sys.path if not _is_checkout(entry)]
    sys.path[:] = [*rest, *checkout] if build == "compiled" else [str(ROOT), *rest]
    return build


def verify(build: str | None) -> str:
    """The build really imported, as ``pure``/``compiled``; exits if it is not ``build``, or if the
    compiled wheel was built from other sources than the checkout's (a stale ``.venv-compiled``)."""
    import otel_repeat_guard

    actual = "compiled" if otel_repeat_guard.build_mode() == "compiled" else "pure"
    package = Path(otel_repeat_guard.__file__).resolve().parent
    if build is not None and actual != build:
        hint = " (build it with `make .venv-compiled/bin/.installed`, run from .venv-compiled)" * (build == "compiled")
        raise SystemExit(f"asked for the {build} build, but {package} is the {actual} one{hint}")
    if actual == "compiled":
        stale = [
            path.relative_to(ROOT).as_posix()
            for path in (ROOT / "otel_repeat_guard").rglob("*.py")
            if "__pycache__" not in path.parts
            and (
                not (package / path.relative_to(ROOT / "otel_repeat_guard")).is_file()
                or (package / path.relative_to(ROOT / "otel_repeat_guard")).read_bytes() != path.read_bytes()
            )
        ]
        if stale:
            raise SystemExit(
                f"the compiled build in {package} is not the checkout's code ({', '.join(stale[:5])} differ):"
                " rebuild it with `make .venv-compiled/bin/.installed`"
            )
    return actual


def exit_code(missed: list[str]) -> int:
    """1, after naming them, when some goals were missed (beyond the noise band; in the span-shape
    matrix, at the median); else 0."""
    if missed:
        print("goals missed (beyond the noise band; span-shape matrix: at the median): " + "; ".join(missed))
        return 1
    return 0

"""The package version, in one place, and which build of the package is running."""

from __future__ import annotations

from importlib.machinery import ExtensionFileLoader
from importlib.util import find_spec
from typing import Literal

__version__ = "0.1.0"


def build_mode() -> Literal["compiled", "pure Python"]:
    """``"compiled"`` when the guard's core runs as mypyc-compiled C extensions (a wheel built with
    a C compiler), ``"pure Python"`` otherwise (an editable install, or a wheel built without a
    compiler or with ``OTEL_REPEAT_GUARD_PURE=1``). Both behave the same; the compiled one is faster."""
    spec = find_spec("otel_repeat_guard.processor")  # the span path's entry: compiled whenever anything is
    return "compiled" if spec is not None and isinstance(spec.loader, ExtensionFileLoader) else "pure Python"

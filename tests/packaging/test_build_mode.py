"""Which build runs, and that it is the one `make` meant: the compiled wheel or the pure-Python install.

``make unit`` and ``make sdk-oldest`` set ``OTEL_REPEAT_GUARD_EXPECT_BUILD=pure``, ``make unit-compiled``
sets ``compiled``: a compiled run that silently imported the checkout, or a compile that fell back to
pure Python, fails here instead of passing on code that was never compiled.
"""

from __future__ import annotations

import glob
import importlib
import os
import subprocess
import sys
from importlib.machinery import ExtensionFileLoader, SourceFileLoader
from pathlib import Path
from typing import Any

import pytest

import otel_repeat_guard
from otel_repeat_guard import __version__, build_mode
from otel_repeat_guard.cli.main import main

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = os.environ.get("OTEL_REPEAT_GUARD_EXPECT_BUILD")


def _hook_config() -> dict[str, Any]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    config: dict[str, Any] = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["hooks"]["custom"]
    return config


def _modules(key: str) -> set[str]:
    """The module names a glob list of the build hook names (as hatch_build.compiled_modules reads it)."""
    files = {path for pattern in _hook_config()[key] for path in glob.glob(pattern, root_dir=ROOT)}
    return {
        path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        for path in (file.replace(os.sep, "/") for file in files)
        if path.endswith(".py")
    }


COMPILED = sorted(_modules("compile") - _modules("interpreted"))
INTERPRETED = sorted(_modules("interpreted"))


def _loader(module: str) -> object:
    return importlib.import_module(module).__spec__.loader  # type: ignore[union-attr]


def test_the_compile_globs_cover_the_core_and_every_exclusion_exists() -> None:
    core = {"processor", "core.canonical", "core.chains", "core.patterns", "spans.span_events", "conventions.base"}
    assert {f"otel_repeat_guard.{name}" for name in core} <= set(COMPILED)
    for pattern in _hook_config()["interpreted"]:  # a misspelt exclusion would compile the module
        assert glob.glob(pattern, root_dir=ROOT), pattern


@pytest.mark.skipif(EXPECTED is None, reason="OTEL_REPEAT_GUARD_EXPECT_BUILD names no build (set by make)")
def test_the_run_is_on_the_build_make_meant() -> None:
    assert EXPECTED in ("compiled", "pure")
    if EXPECTED == "compiled":
        assert build_mode() == "compiled"
        package = Path(otel_repeat_guard.__file__).resolve().parent
        assert package != ROOT / "otel_repeat_guard", f"imported the checkout ({package}), not the installed wheel"
        not_compiled = [module for module in COMPILED if not isinstance(_loader(module), ExtensionFileLoader)]
        assert not not_compiled, f"modules the hook compiles that run as Python: {not_compiled}"
    else:
        assert build_mode() == "pure Python"
        compiled = [module for module in COMPILED if not isinstance(_loader(module), SourceFileLoader)]
        assert not compiled, f"extension modules in the pure-Python install: {compiled}"


@pytest.mark.skipif(build_mode() != "compiled", reason="the compiled build only")
def test_the_compiled_modules_need_no_build_tool_at_run_time(tmp_path: Path) -> None:
    """mypy (with mypy_extensions and librt) is in this environment for the dev tools, not in a user's."""
    code = (
        "import importlib, sys\n"
        "for module in sys.argv[1:]: importlib.import_module(module)\n"
        "print(sorted({m.partition('.')[0] for m in sys.modules} & {'mypy', 'mypy_extensions', 'librt', 'setuptools'}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *COMPILED],
        env={**os.environ, "PYTHONSAFEPATH": "1"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout == "[]\n"


def test_interpreted_modules_stay_python() -> None:
    for module in INTERPRETED:
        assert isinstance(_loader(module), SourceFileLoader), module


def test_version_flag_names_the_build(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"otel-repeat-guard {__version__} ({build_mode()})\n"
    assert build_mode() in ("compiled", "pure Python")


def test_version_flag_of_the_installed_command() -> None:
    command = Path(sys.executable).with_name("otel-repeat-guard")
    done = subprocess.run([command, "--version"], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout == f"otel-repeat-guard {__version__} ({build_mode()})\n"

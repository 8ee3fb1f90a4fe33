"""The wheel without a C compiler, or with OTEL_REPEAT_GUARD_PURE=1: the pure-Python package, the same files.

Each test builds a real wheel from the checkout with pip (build isolation, as a user's install does),
with ``CC=false`` standing for a machine without a compiler. The compiled wheel itself is built and
tested by ``make unit-compiled``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PURE_TAG = "-py3-none-any.whl"


def _pip_wheel(out: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {
        key: value
        for key, value in os.environ.items()
        if key not in ("OTEL_REPEAT_GUARD_PURE", "OTEL_REPEAT_GUARD_REQUIRE_COMPILED")
    }
    command = [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--wheel-dir", str(out), str(ROOT)]
    return subprocess.run(
        command, env={**environ, **env}, capture_output=True, text=True, timeout=600, check=False, cwd=out
    )


def _the_pure_package(wheel: Path) -> None:
    """Nothing compiled, and every module byte for byte the checkout's."""
    assert wheel.name.endswith(PURE_TAG), wheel.name
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert not [name for name in names if name.endswith((".so", ".pyd"))]
        modules = sorted(name for name in names if name.endswith(".py"))
        assert modules == sorted(
            path.relative_to(ROOT).as_posix()
            for path in (ROOT / "otel_repeat_guard").rglob("*.py")
            if "__pycache__" not in path.parts
        )
        for name in modules:
            assert archive.read(name) == (ROOT / name).read_bytes(), name


def test_without_a_compiler_the_wheel_is_pure_python_and_runs(tmp_path: Path) -> None:
    done = _pip_wheel(tmp_path, CC="false")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "building the pure-Python package: no working C compiler" in done.stdout + done.stderr
    (wheel,) = tmp_path.glob("*.whl")
    _the_pure_package(wheel)

    target = tmp_path / "installed"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        timeout=300,
    )
    probe = (
        "import otel_repeat_guard as g, pathlib, sys;"
        "assert pathlib.Path(g.__file__).is_relative_to(sys.argv[1]), g.__file__;"
        'print(g.build_mode(), g.canonical_arguments(\'{"b": 1, "a": [1e400]}\'))'
    )
    ran = subprocess.run(
        [sys.executable, "-c", probe, str(target)],
        env={**os.environ, "PYTHONPATH": str(target), "PYTHONSAFEPATH": "1"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == 'pure Python {"a":[1E+400],"b":1}\n'


def test_pure_by_request_needs_no_compiler_and_no_mypy(tmp_path: Path) -> None:
    done = _pip_wheel(tmp_path, OTEL_REPEAT_GUARD_PURE="1", CC="false")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "OTEL_REPEAT_GUARD_PURE is set, building the pure-Python package" in done.stdout + done.stderr
    assert "Collecting mypy" not in done.stdout  # the hook asks for its compile tools only when it may compile
    (wheel,) = tmp_path.glob("*.whl")
    _the_pure_package(wheel)


def test_a_required_compiled_build_fails_without_a_compiler(tmp_path: Path) -> None:
    done = _pip_wheel(tmp_path, CC="false", OTEL_REPEAT_GUARD_REQUIRE_COMPILED="1")
    assert done.returncode != 0
    assert "the compiled build failed (OTEL_REPEAT_GUARD_REQUIRE_COMPILED is set)" in done.stdout + done.stderr
    assert "no working C compiler" in done.stdout + done.stderr
    assert not list(tmp_path.glob("*.whl"))

"""Which wheel a source build gives: pure Python by default, from a checkout or an sdist; compiled only when asked
(``OTEL_REPEAT_GUARD_COMPILE=1``), and pure again without a C compiler or with ``OTEL_REPEAT_GUARD_PURE=1``.

Each test builds a real wheel with pip (build isolation, as a user's install does), with ``CC=false``
standing for a machine without a compiler. The compiled wheel itself is built and tested by
``make unit-compiled``; the release's settings for it (cibuildwheel's) by test_release.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PURE_TAG = "-py3-none-any.whl"
SWITCHES = ("OTEL_REPEAT_GUARD_COMPILE", "OTEL_REPEAT_GUARD_PURE", "OTEL_REPEAT_GUARD_REQUIRE_COMPILED")


def _clean_environment(**env: str) -> dict[str, str]:
    """This process's environment without the build switches, plus ``env``."""
    return {**{key: value for key, value in os.environ.items() if key not in SWITCHES}, **env}


def _pip_wheel(out: Path, source: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--wheel-dir", str(out), str(source)]
    return subprocess.run(
        command, env=_clean_environment(**env), capture_output=True, text=True, timeout=600, check=False, cwd=out
    )


def _the_pure_package(wheel: Path) -> None:
    """Nothing compiled, and every module byte for byte the checkout's."""
    assert wheel.name.endswith(PURE_TAG), wheel.name
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert not [name for name in names if name.endswith((".so", ".pyd"))]
        modules = sorted(name for name in names if name.endswith(".py"))
        assert modules == sorted(
            [
                *(
                    path.relative_to(ROOT).as_posix()
                    for path in (ROOT / "otel_repeat_guard").rglob("*.py")
                    if "__pycache__" not in path.parts
                ),
                "otel_repeat_guard_entry.py",  # the console scripts' entry, beside the package
            ]
        )
        for name in modules:
            assert archive.read(name) == (ROOT / name).read_bytes(), name


def _no_compile_tools_fetched(done: subprocess.CompletedProcess[str]) -> None:
    """The hook asks for mypy and setuptools only when it compiles: a pure build installs neither."""
    output = done.stdout + done.stderr
    assert "Collecting hatchling" in output, "pip's verbose output changed: the check below reads nothing"
    assert "Collecting mypy" not in output
    assert "Collecting setuptools" not in output


def test_by_default_a_source_build_is_pure_python_and_fetches_no_compiler_tools(tmp_path: Path) -> None:
    done = _pip_wheel(tmp_path)  # a C compiler works here: the default still does not use it
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    output = done.stdout + done.stderr
    assert "building the pure-Python package (set OTEL_REPEAT_GUARD_COMPILE=1 to compile the core" in output
    assert "compiling the core with mypyc" not in output
    _no_compile_tools_fetched(done)
    (wheel,) = tmp_path.glob("*.whl")
    _the_pure_package(wheel)


def test_an_sdist_holds_the_build_hook_and_builds_pure_python_by_default(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--outdir", str(tmp_path / "sdist"), str(ROOT)],
        env=_clean_environment(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    (sdist,) = (tmp_path / "sdist").glob("otel_repeat_guard-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"hatch_build.py", "pyproject.toml", "otel_repeat_guard/processor.py"} <= names

    (tmp_path / "wheel").mkdir()
    done = _pip_wheel(tmp_path / "wheel", sdist)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    _no_compile_tools_fetched(done)
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    _the_pure_package(wheel)


def test_asked_to_compile_without_a_compiler_the_wheel_is_pure_python_and_runs(tmp_path: Path) -> None:
    done = _pip_wheel(tmp_path, CC="false", OTEL_REPEAT_GUARD_COMPILE="1")
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


def test_pure_by_request_wins_over_the_compile_switch_and_needs_no_compiler_and_no_mypy(tmp_path: Path) -> None:
    done = _pip_wheel(tmp_path, OTEL_REPEAT_GUARD_PURE="1", OTEL_REPEAT_GUARD_COMPILE="1", CC="false")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "building the pure-Python package (OTEL_REPEAT_GUARD_PURE is set)" in done.stdout + done.stderr
    _no_compile_tools_fetched(done)
    (wheel,) = tmp_path.glob("*.whl")
    _the_pure_package(wheel)


def test_pure_and_a_required_compiled_build_at_once_is_refused_naming_both(tmp_path: Path) -> None:
    done = _pip_wheel(tmp_path, OTEL_REPEAT_GUARD_PURE="1", OTEL_REPEAT_GUARD_REQUIRE_COMPILED="1")
    assert done.returncode != 0
    message = "OTEL_REPEAT_GUARD_PURE and OTEL_REPEAT_GUARD_REQUIRE_COMPILED are both set: unset one of them"
    assert message in done.stdout + done.stderr
    assert not list(tmp_path.glob("*.whl"))


def test_a_required_compiled_build_asks_for_the_compile_and_fails_without_a_compiler(tmp_path: Path) -> None:
    done = _pip_wheel(tmp_path, CC="false", OTEL_REPEAT_GUARD_REQUIRE_COMPILED="1")
    assert done.returncode != 0
    assert "the compiled build failed (OTEL_REPEAT_GUARD_REQUIRE_COMPILED is set)" in done.stdout + done.stderr
    assert "no working C compiler" in done.stdout + done.stderr
    assert not list(tmp_path.glob("*.whl"))

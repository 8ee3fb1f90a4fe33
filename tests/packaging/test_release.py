"""The release's settings: cibuildwheel builds compiled wheels, so a user of a published release never compiles.

A source build is pure Python unless ``OTEL_REPEAT_GUARD_COMPILE=1`` (test_fallback.py); the release turns the
compile on, requires it, and tests each wheel with a command that refuses a pure-Python one. The command's
first check runs here on whichever build this suite runs on: it passes on the compiled one
(``make unit-compiled``) and refuses the pure one (``make unit``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from otel_repeat_guard import build_mode

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parents[2]


def _pyproject() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        pyproject: dict[str, Any] = tomllib.load(handle)
    return pyproject


def _release() -> dict[str, Any]:
    settings: dict[str, Any] = _pyproject()["tool"]["cibuildwheel"]
    return settings


def _hook_switch(name: str) -> str:
    """The environment variable hatch_build.py reads under ``name`` (it imports hatchling, absent here)."""
    source = (ROOT / "hatch_build.py").read_text(encoding="utf-8")
    found = re.search(rf'^{name} = "([A-Z_]+)"$', source, re.MULTILINE)
    assert found, f"hatch_build.py defines no {name}"
    return found[1]


def test_the_release_compiles_with_the_switches_the_build_hook_reads_and_requires_the_compile() -> None:
    compile_switch, require_switch = _hook_switch("COMPILE_ENV"), _hook_switch("REQUIRE_ENV")
    assert (compile_switch, require_switch) == ("OTEL_REPEAT_GUARD_COMPILE", "OTEL_REPEAT_GUARD_REQUIRE_COMPILED")
    assert _release()["environment"] == {compile_switch: "1", require_switch: "1"}


def test_the_release_builds_every_python_the_package_supports() -> None:
    oldest = re.fullmatch(r">=3\.(\d+)", _pyproject()["project"]["requires-python"])
    assert oldest, "requires-python is no longer a plain lower bound: update this test"
    builds = _release()["build"]
    assert builds == [f"cp3{minor}-*" for minor in range(int(oldest[1]), int(oldest[1]) + len(builds))]
    assert builds[-1] == "cp314-*"


def test_the_release_tests_each_wheel_as_make_unit_compiled_does() -> None:
    release = _release()
    assert release["test-environment"]["OTEL_REPEAT_GUARD_EXPECT_BUILD"] == "compiled"
    suite = release["test-command"][1]
    assert "--import-mode=append" in suite  # the installed wheel, not the copied sources, is imported
    for path in suite.split()[-2:]:
        assert (ROOT / path).exists(), path
        assert path.split("/")[0] in release["test-sources"], path


def test_the_release_test_command_passes_the_compiled_build_and_refuses_a_pure_one(tmp_path: Path) -> None:
    check = _release()["test-command"][0]
    environment = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    environment["PYTHONSAFEPATH"] = "1"  # the installed package, not a checkout on the path
    done = subprocess.run(
        ["sh", "-c", check], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=60, check=False
    )
    if build_mode() == "compiled":
        assert (done.returncode, done.stderr) == (0, "")
    else:
        assert (done.returncode, done.stderr) == (1, "the wheel is pure Python\n")

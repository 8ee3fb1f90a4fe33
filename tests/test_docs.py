"""Every code block in the README and docs/ as written: Python blocks run, shell blocks name real commands."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks(language: str) -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for number, match in enumerate(FENCE.finditer(page.read_text(encoding="utf-8")), start=1):
            if match[1] == language:
                found.append((f"{page.relative_to(ROOT)}#{number}", match[2]))
    return found


@pytest.mark.parametrize(("where", "code"), blocks("python"), ids=[where for where, _ in blocks("python")])
def test_python_blocks_run_as_written(where: str, code: str, tmp_path: Path) -> None:
    environment = {
        **os.environ,
        "OTEL_TRACES_EXPORTER": "none",  # a block that builds OTLP exporters has no backend to reach here
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_REPEAT_GUARD_DB": str(tmp_path / "store.db"),
    }
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{where} failed:\n{done.stderr[-3000:]}"


def _targets() -> set[str]:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    return {m[1] for m in re.finditer(r"^([\w.-]+):", makefile, re.MULTILINE)}


@pytest.mark.parametrize(("where", "code"), blocks("sh"), ids=[where for where, _ in blocks("sh")])
def test_shell_blocks_name_real_targets_and_commands(where: str, code: str) -> None:
    """Shell blocks start services or the whole suite, so they are checked, not run: each `make`
    target exists and each `otel-repeat-guard` subcommand accepts the options shown."""
    for line in code.splitlines():
        words = shlex.split(line, comments=True)
        while words and "=" in words[0] and not words[0].startswith("-"):  # VAR=value prefixes
            words = words[1:]
        if not words:
            continue
        if words[0] == "make":
            assert set(words[1:]) <= _targets(), f"{where}: no such make target in {line!r}"
        elif words[0] == "otel-repeat-guard":
            command = [sys.executable, "-m", "otel_repeat_guard.cli", *words[1:2], "--help"]
            done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
            assert done.returncode == 0, f"{where}: {line!r}: {done.stderr}"
            for option in (w.split("=")[0] for w in words[2:] if w.startswith("--")):
                assert option in done.stdout, f"{where}: {line!r}: {option} is not an option"
        elif words[:2] == ["python", "-m"]:  # a module of this checkout (the benchmarks)
            assert (ROOT / (words[2].replace(".", "/") + ".py")).is_file(), f"{where}: no module in {line!r}"
        else:
            assert words[0] in {"docker", "opentelemetry-instrument", "htpasswd", "pip", "apt-get", "export"}, (
                f"{where}: {line!r}"
            )


def test_the_evidence_page_shows_the_figures_the_replay_prints() -> None:
    """docs/evidence.md's table is what benchmarks/real_trajectories.py prints on the 945 trajectories (about
    10 s). The data lives beside the checkout, not in it: without it there is nothing to compare."""
    from benchmarks.real_trajectories import measure, render
    from benchmarks.trajectories import default_data_dir, load

    data = default_data_dir()
    if not (data / "manifest.json").is_file():
        pytest.skip(f"no trajectories at {data} (set $OTEL_REPEAT_GUARD_TRAJECTORIES)")
    page = (ROOT / "docs" / "evidence.md").read_text(encoding="utf-8")
    shown = page.split("-->\n", 1)[1].split("\n<!-- /figures -->", 1)[0]
    printed = render(measure(load(data)))
    assert shown.splitlines() == printed[: printed.index("", 2)]

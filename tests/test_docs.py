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
            command = [sys.executable, "-m", "otel_repeat_guard.cli.main", *words[1:2], "--help"]
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


TURN_ON = re.compile(
    r"^### (.+?)\n\n```sh\npip install 'otel-repeat-guard\[([a-z-]+)\]'\n```\n\n```python turn-on\n(.*?)^```",
    re.M | re.S,
)
INSTRUMENTATION = re.compile(r"^from (openinference\.instrumentation\.\w+) import", re.M)


def _extras() -> dict[str, list[str]]:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    with (ROOT / "pyproject.toml").open("rb") as handle:
        extras: dict[str, list[str]] = tomllib.load(handle)["project"]["optional-dependencies"]
    return extras


def _turn_on_sections() -> list[tuple[str, str, str]]:
    page = (ROOT / "docs" / "runtimes.md").read_text(encoding="utf-8")
    return [(m[1], m[2], m[3]) for m in TURN_ON.finditer(page.split("## Turn it on, per framework", 1)[1])]


def test_the_readme_opens_adding_the_guard_with_the_install_line() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Add it to your agent\n\n", 1)[1]
    assert section.startswith("```sh\npip install 'otel-repeat-guard[<framework>]'")


@pytest.mark.parametrize(("title", "extra", "code"), _turn_on_sections(), ids=[t for t, _, _ in _turn_on_sections()])
def test_each_framework_section_installs_an_extra_that_holds_the_instrumentation_it_imports(
    title: str, extra: str, code: str
) -> None:
    """docs/runtimes.md: the extra exists and names (as a requirement) each instrumentation the section's
    lines import; the lines are valid Python (they need the framework installed, so they are not run here)."""
    requirements = _extras().get(extra)
    assert requirements is not None, f"{title}: no extra [{extra}] in pyproject.toml"
    names = {re.split(r"[\[<>=!~ ]", r, maxsplit=1)[0] for r in requirements}
    for module in INSTRUMENTATION.findall(code):
        distribution = module.replace(".", "-").replace("_", "-")
        assert distribution in names, f"{title}: [{extra}] does not install {distribution}, which it imports"
    compile(code, f"docs/runtimes.md: {title}", "exec")


def test_every_framework_extra_has_its_section() -> None:
    frameworks = {"langchain", "openai-agents", "crewai", "smolagents", "llama-index", "haystack", "agno", "autogen"}
    frameworks |= {"semantic-kernel", "pydantic-ai", "strands", "google-adk"}
    assert {extra for _, extra, _ in _turn_on_sections()} == frameworks
    assert frameworks <= set(_extras())


EXAMPLE_SECTIONS = {
    "langgraph_weather.py": "LangChain / LangGraph",
    "openai_agents_weather.py": "OpenAI Agents SDK",
    "crewai_weather.py": "CrewAI",
    "pydantic_ai_weather.py": "pydantic-ai",
}
"""Each example of a framework that docs/runtimes.md turns on, and that section's title (each example runs in
its framework's group: tests/integrations/test_examples.py)."""


def _code_lines(text: str) -> list[str]:
    """The lines of ``text`` without comments and blank lines, stripped (a ``#`` inside a string is kept only
    where no code follows a ``  #``: enough for these short blocks)."""
    lines = (line.split("  # ", 1)[0].strip() for line in text.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


@pytest.mark.parametrize(("script", "title"), EXAMPLE_SECTIONS.items())
def test_each_example_installs_and_turns_on_its_framework_as_docs_runtimes_shows(script: str, title: str) -> None:
    sections = {t: (extra, code) for t, extra, code in _turn_on_sections()}
    extra, code = sections[title]
    example = (ROOT / "examples" / script).read_text(encoding="utf-8")
    installs = re.search(r"pip install 'otel-repeat-guard\[([a-z,-]+)\]'", example)
    assert installs is not None and extra in installs[1].split(","), f"{script}: its pip line lacks [{extra}]"
    missing = [line for line in _code_lines(code) if line not in _code_lines(example)]
    assert not missing, f"examples/{script} lacks these lines of docs/runtimes.md's {title!r} section: {missing}"


def test_the_examples_readme_lists_every_example_and_the_readme_points_to_it() -> None:
    listed = (ROOT / "examples" / "README.md").read_text(encoding="utf-8")
    scripts = sorted(path.name for path in (ROOT / "examples").glob("*.py"))
    assert set(EXAMPLE_SECTIONS) <= set(scripts)
    assert [s for s in scripts if f"({s})" not in listed] == []
    assert "(examples/README.md)" in (ROOT / "README.md").read_text(encoding="utf-8")

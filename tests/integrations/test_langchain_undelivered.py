"""The issue's repro (issue 39, item 5): a plain LangChain agent (``create_agent`` with LangChain's OpenAI model,
no adapter of ours) under zero-code setup with ``OTEL_REPEAT_GUARD_CLIENT_ADAPTERS=openai``. OpenInference's
LangChain instrumentation does not make its spans current, so the OpenAI client adapter finds no agent run where
the request goes out, and the reminders stay in the inbox. They are not lost without a word: one warning names
the client adapter's requirement and LangChain's adapter, and ``repeat_tool_guard.undelivered_reminders`` counts
the three (3, 5 and 8 identical calls), each on the model call that went out without it.

A real subprocess under ``opentelemetry-instrument`` (the SDK's configurator from ``opentelemetry-distro``), its
model the local fake OpenAI server. A user's install has only OpenInference's instrumentation (the ``langchain``
extra); this group has OpenLLMetry's too, under the same entry-point name, so both are switched off and the
script turns OpenInference's on first thing, as its entry point would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .fake_openai import FakeOpenAI
from .scenario import require

require("langchain_openai")
require("openinference.instrumentation.langchain")

ROOT = Path(__file__).resolve().parents[2]
INSTRUMENT = Path(sys.executable).parent / "opentelemetry-instrument"
SCRIPT = """
import os, sys
from openinference.instrumentation.langchain import LangChainInstrumentor
LangChainInstrumentor().instrument()  # on the global provider opentelemetry-instrument set up
from langchain.agents import create_agent
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

@tool
def read_file(path: str) -> str:
    \"\"\"Read a file.\"\"\"
    return "hello"

agent = create_agent(ChatOpenAI(model="gpt-4o-mini", base_url=os.environ["FAKE_OPENAI"], api_key="test"), [read_file])
agent.invoke({"messages": [("user", "read a.txt")]})
"""
LOOP = (("read_file", {"path": "a.txt"}),) * 8


def _objects(text: str) -> list[Any]:
    """The JSON objects the console exporters printed, one after another."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while (start := text.find("{", at)) >= 0:
        value, at = decoder.raw_decode(text, start)
        found.append(value)
    return found


def _points(metrics: list[Any], name: str) -> list[dict[str, Any]]:
    return [
        point
        for export in metrics
        for resource in export.get("resource_metrics", [])
        for scope in resource["scope_metrics"]
        for metric in scope["metrics"]
        if metric["name"] == name
        for point in metric["data"]["data_points"]
    ]


def test_the_plain_langchain_agent_with_the_client_adapter_logs_the_undelivered_reminders_and_counts_3(
    tmp_path: Path,
) -> None:
    script = tmp_path / "agent.py"
    script.write_text(SCRIPT)
    with FakeOpenAI(script=LOOP) as server:
        env = {
            **os.environ,
            "FAKE_OPENAI": server.base_url,
            "OTEL_REPEAT_GUARD_ENABLED": "true",
            "OTEL_REPEAT_GUARD_CLIENT_ADAPTERS": "openai",
            "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "langchain",
            "OTEL_TRACES_EXPORTER": "none",
            "OTEL_METRICS_EXPORTER": "console",
            "OTEL_LOGS_EXPORTER": "none",
            "OTEL_SERVICE_NAME": "plain-langchain",
        }
        done = subprocess.run(
            [str(INSTRUMENT), sys.executable, str(script)],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert len(server.requests) == 9
    assert not any("system-reminder" in json.dumps(body) for body in server.requests)  # the repro: none delivered
    warnings = [line for line in done.stderr.splitlines() if "did not reach the model" in line]
    assert warnings == [
        "repeat guard: a gentle reminder for tool 'read_file' did not reach the model: an adapter asked for the "
        "run's reminders, but found no agent run where its model request went out (no_run). To deliver it: a "
        "client adapter (OTEL_REPEAT_GUARD_CLIENT_ADAPTERS, guard_client()) finds the run from the span current "
        "where the request goes out, so the framework's instrumentation must make its spans current there "
        "(OpenInference's LangChain instrumentation does not); for LangChain, use create_agent(..., "
        "middleware=[RepeatGuardMiddleware()]) or create_react_agent(..., "
        "pre_model_hook=repeat_guard_pre_model_hook()) from otel_repeat_guard.integrations.langchain."
    ]
    metrics = _objects(done.stdout)
    reminders = sum(p["value"] for p in _points(metrics, "repeat_tool_guard.reminders"))
    undelivered = {
        (p["attributes"]["repeat_tool_guard.tier"], p["attributes"]["reason"]): p["value"]
        for p in _points(metrics, "repeat_tool_guard.undelivered_reminders")
    }
    assert reminders == 3
    assert undelivered == {("gentle", "no_run"): 1, ("detailed", "no_run"): 2}
    assert sum(undelivered.values()) == 3

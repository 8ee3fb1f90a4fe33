"""Streamlit's command line, with what the dashboard's pages read with imported before the server answers.

``otel-repeat-guard dashboard`` runs ``python -m otel_repeat_guard.dashboard.launch run app.py ...``, the same as
``python -m streamlit run app.py ...`` except that pandas, pyarrow, genai-prices and the store's queries (about a
second, more on a busy machine) are imported first: Streamlit imports a page's modules when the first visitor's
page runs, so that visitor waited for them (benchmarks/dashboard_page.py, "first run").

What they made is then frozen (``gc.freeze``): Streamlit collects garbage after every run of a page (its
``runner.postScriptGC``), and that full collection walked these 110,000-odd objects each time: 0.1-0.2 s of CPU
a page (and a rerun), beside the browser drawing it on a busy machine. They live as long as the server.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import runpy
import sys

WARM = ("pandas", "pyarrow", "genai_prices", "otel_repeat_guard.store.queries", "otel_repeat_guard.dashboard.costs")
"""Imported before the server starts: what every page reads with, none of it Streamlit's own page state."""


def warm() -> None:
    """WARM imported, and what they made frozen out of the collector's way."""
    for name in WARM:
        with contextlib.suppress(ImportError):  # the command checked the extra; the page says what is missing
            importlib.import_module(name)
    gc.freeze()  # they live as long as the server: no collection after a page's run walks them


def main() -> None:
    warm()
    sys.argv[0] = "streamlit"
    runpy.run_module("streamlit", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()

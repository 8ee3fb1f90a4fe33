"""The loop-hotspot dashboard: ``queries`` (SQL to DataFrames), ``charts`` (Altair), ``app`` (the Streamlit page).

Needs the ``dashboard`` extra: ``pip install 'otel-repeat-guard[dashboard]'``.
"""

from pathlib import Path

# The pages' folder, in the package as imported: the app registers these files and the overview links
# to them, so both name the same file even when the app's script runs from a checkout beside a wheel.
VIEWS = Path(__file__).resolve().parent / "views"

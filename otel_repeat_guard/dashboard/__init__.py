"""The loop-hotspot dashboard: ``queries`` (SQL to DataFrames), ``charts`` (Altair), ``app`` (the Streamlit page).

Needs the ``dashboard`` extra: ``pip install 'otel-repeat-guard[dashboard]'``.
"""

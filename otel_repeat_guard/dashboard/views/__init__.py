"""The dashboard's pages, one script each, run by ``st.navigation`` from ``app``: each reads through
``reads`` and draws with ``sections``. No SQL here. Each file is a Streamlit page script: it draws when
Streamlit runs it (``__name__ == "__main__"``), and importing it draws nothing.

The folder is not called ``pages``: Streamlit would take a ``pages`` folder next to ``app.py`` for the pages
of its older multipage apps, and run them without ``app`` (no sidebar, no filters).
"""

"""The page's sections, one module each: each draws what ``app`` (or, after a widget's choice, ``reads``)
read from the store. No SQL and no connections here.

The folder is not called ``pages``: Streamlit would take a ``pages`` folder next to ``app.py`` for the
pages of a multipage app and list them in the sidebar.
"""

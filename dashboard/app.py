"""`streamlit run dashboard/app.py` from a checkout. The page itself lives in the package
(``otel_repeat_guard/dashboard/app.py``) so that it also ships in the wheel; this file only runs it."""

from otel_repeat_guard.dashboard.app import main

main()

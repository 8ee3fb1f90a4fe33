"""The Overview's headline as one HTML element, and the sidebar's line under its folded filters: both show
their text as typed."""

from __future__ import annotations

import datetime as dt

from otel_repeat_guard.dashboard.sections.headline import HEADLINE_CLASS, Figure, headline_html, read_headline
from otel_repeat_guard.dashboard.sections.sidebar import CUSTOM_RANGE, chosen
from otel_repeat_guard.store.queries import Filters


def test_the_headline_escapes_every_text_and_reads_back_as_shown() -> None:
    figures = [
        Figure("Wasted cost", "$0.68", 'Priced with genai-prices. No price for: <b>"x"</b> & co.'),
        Figure("Longest run", "12"),
    ]
    html = headline_html(figures)
    assert f'<dl class="{HEADLINE_CLASS}"' in html
    assert "<b>" not in html.split("</style>", 1)[1]
    assert read_headline(html) == figures
    assert read_headline("<table><tr><td>1</td></tr></table>") == []


def test_the_line_under_the_filters_names_each_choice_as_typed() -> None:
    assert chosen(Filters(), "Last 24 hours", auto=False) == "Last 24 hours · every service, agent, tool and tier"
    line = chosen(Filters(tools=("__init__", "b*c"), agents=("coder",), tiers=("gentle",)), "Last hour", auto=True)
    assert line == (
        r"Last hour · Agent\: coder · Tool\: \_\_init\_\_, b\*c · Reminder tier\: gentle · auto\-refresh every 5 s"
    )
    start = int(dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.timezone.utc).timestamp()) * 1_000_000_000
    end = start + 3_600 * 1_000_000_000
    custom = chosen(Filters(start_ns=start, end_ns=end, kind="cycle"), CUSTOM_RANGE, auto=False)
    assert custom == r"2026\-12\-01 09\:30 to 2026\-12\-01 10\:30 UTC · Loop kind\: Cycle"

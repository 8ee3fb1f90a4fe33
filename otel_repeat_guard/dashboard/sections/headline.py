"""The Overview's headline figures as one HTML element: a grid of label and value, the help as each label's title.

Twelve ``st.metric`` elements cost a fresh page nine more files of the browser's code and a tenth of a second
of its time (benchmarks/dashboard_page.py); one ``st.html`` element (its code is on the page already for the run
timeline) draws the same figures. No Streamlit here: the text only."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from html.parser import HTMLParser

HEADLINE_CLASS = "repeat-guard-headline"
"""The class of the headline's ``<dl>``: what the tests and the benchmarks find it by."""
FIGURE_SELECTOR = f"dl.{HEADLINE_CLASS} dd"
"""A figure of the headline, as a browser finds it (CSS)."""

_STYLE = f"""<style>
dl.{HEADLINE_CLASS} {{ display: grid; grid-template-columns: repeat(4, minmax(0, 1fr)); gap: 1rem; margin: 0; padding: 0; }}
.{HEADLINE_CLASS} > div {{ min-width: 0; }}
.{HEADLINE_CLASS} dt {{ font-size: 0.875rem; font-weight: 400; line-height: 1.6; margin: 0 0 0.25rem; }}
.{HEADLINE_CLASS} dt[title] {{ cursor: help; }}
.{HEADLINE_CLASS} dt[title]::after {{ content: "?"; display: inline-block; box-sizing: border-box; width: 1rem;
  height: 1rem; margin-left: 0.4rem; border: 1.5px solid rgba(49, 51, 63, 0.5); border-radius: 50%;
  color: rgba(49, 51, 63, 0.6); font-size: 0.65rem; font-weight: 600; line-height: 0.8rem; text-align: center;
  vertical-align: 0.05rem; }}
.{HEADLINE_CLASS} dd {{ font-size: 2.25rem; line-height: 1.2; margin: 0; padding-bottom: 0.25rem;
  overflow-wrap: anywhere; }}
</style>"""


@dataclass(frozen=True, slots=True)
class Figure:
    """One headline figure: its label, its value as shown, and what it counts (the label's tooltip)."""

    label: str
    value: str
    help: str | None = None


def headline_html(figures: list[Figure]) -> str:
    """The figures as one ``<dl>``, four to a row, every text escaped."""
    items = "".join(f"<div><dt{_title(f.help)}>{escape(f.label)}</dt><dd>{escape(f.value)}</dd></div>" for f in figures)
    return f'{_STYLE}<dl class="{HEADLINE_CLASS}" aria-label="Headline figures">{items}</dl>'


def _title(text: str | None) -> str:
    return "" if text is None else f' title="{escape(text)}"'


class _Figures(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[Figure] = []
        self._tag: str | None = None
        self._label, self._text = "", ""
        self._help: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("dt", "dd"):
            self._tag, self._text = tag, ""
            if tag == "dt":
                self._help = dict(attrs).get("title")

    def handle_endtag(self, tag: str) -> None:
        if tag == "dt" and self._tag == "dt":
            self._label = self._text
        elif tag == "dd" and self._tag == "dd":
            self.found.append(Figure(self._label, self._text, self._help))
        self._tag = None

    def handle_data(self, data: str) -> None:
        if self._tag is not None:
            self._text += data


def read_headline(html: str) -> list[Figure]:
    """The figures back from the headline's HTML, as a browser shows them (the tests and benchmarks read them)."""
    if HEADLINE_CLASS not in html:
        return []
    parser = _Figures()
    parser.feed(html)
    return parser.found

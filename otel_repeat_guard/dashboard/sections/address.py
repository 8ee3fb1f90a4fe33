"""The sidebar's choices in the page's address, so that a link opens the same page on the same selection
(``/hotspots?tool=sql_query&range=Last+hour``). The address is read once per session, before the widgets
are drawn; after that the widgets' own state leads and the address follows it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import streamlit as st

from otel_repeat_guard.store.queries import Filters

PARAMS = {"service": "services", "agent": "agents", "tool": "tools", "tier": "tiers"}
"""Address parameter -> the sidebar's widget key (and ``Filters`` field)."""
RANGE = "range"
PAGE_PARAMS = ("by", "hotspot", "loop")
"""What a page puts in the address itself (the Reminders grouping, the Runs page's tool and loop): the sidebar
keeps them as they are."""


def restore_choice(name: str, options: Mapping[str, object], key: str) -> None:
    """A page's box ``key`` from the address's ``name`` (one of ``options``, by its text there), once: before the
    box is first drawn in this session."""
    wanted = st.query_params.get(name)
    if key not in st.session_state and wanted is not None and wanted in options:
        st.session_state[key] = options[wanted]


def show_choice(name: str, value: str | None) -> None:
    """The address's ``name`` after a page's box: its value, or nothing for the box's default (None)."""
    params = st.query_params
    if value is None:
        if name in params:
            del params[name]
    elif params.get(name) != value:
        params[name] = value


def restore(offered: Mapping[str, Sequence[str]], ranges: Sequence[str], key: str) -> bool:
    """The address's choices into the session for the widgets not drawn yet, keeping only values the store
    offers (an odd value in a link costs nothing else). Whether the time range came from the address."""
    params = st.query_params
    for name, widget in PARAMS.items():
        if widget not in st.session_state and name in params:
            st.session_state[widget] = [v for v in params.get_all(name) if v in offered[widget]]
    wanted = params.get(RANGE)
    if key not in st.session_state and wanted in ranges:
        st.session_state[key] = wanted
        return True
    return False


def publish(filters: Filters, time_range: str, default_range: str, shareable: Sequence[str]) -> None:
    """The address after the sidebar's choices: each chosen value, and the time range unless it is the
    default (or a custom range, which is not shared)."""
    wanted: dict[str, list[str]] = {
        name: list(getattr(filters, widget)) for name, widget in PARAMS.items() if getattr(filters, widget)
    }
    if time_range != default_range and time_range in shareable:
        wanted[RANGE] = [time_range]
    params = st.query_params
    wanted |= {name: params.get_all(name) for name in PAGE_PARAMS if name in params}
    if {name: params.get_all(name) for name in params} != wanted:
        params.from_dict(wanted)

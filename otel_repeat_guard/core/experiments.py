"""Reading a wording experiment: the share of reminders that broke their loop per variant, its 95% Wilson interval,
and one sentence saying whether the difference between the variants is clear at these counts.

The dashboard's "Outcome by variant" view and ``doctor --store`` both print :func:`variant_table`'s answer, from
the counts a store's reader gives (``Reader.reminder_variants``). Pure: no store, no pandas.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

Z_95 = 1.959963984540054
"""The standard normal quantile of a two-sided 95% interval."""
MIN_DECIDED = 30
"""Decided reminders (broken + ignored) a variant needs before its interval is worth reading: below it the interval
spans about 30 points or more, and the normal approximation behind any comparison is rough."""
MIN_EACH_WAY = 5
"""Broken and ignored reminders a variant needs each (a share near 0 or 1 needs more reminders to be told apart)."""


@dataclass(frozen=True, slots=True)
class VariantCounts:
    """What a store counted for one variant (and model: None when the model is unknown)."""

    variant: str
    model: str | None
    reminders: int
    broken: int
    ignored: int
    loops: int = 0
    wasted_calls: int = 0
    wasted_tokens: int = 0


@dataclass(frozen=True, slots=True)
class VariantRow:
    """One line of the table: a variant (``model`` None: all its models), its counts and its broken share."""

    variant: str
    model: str | None
    reminders: int
    decided: int
    broken: int
    share: float | None
    low: float | None
    high: float | None
    loops: int
    wasted_calls: int
    wasted_tokens: int


@dataclass(frozen=True, slots=True)
class VariantTable:
    """Per variant, per variant and model, and the sentence on the difference between the variants."""

    by_variant: tuple[VariantRow, ...]
    by_model: tuple[VariantRow, ...]
    verdict: str


def wilson(successes: int, trials: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of ``successes`` out of ``trials`` (a proportion's 95% interval by default)."""
    if trials <= 0:
        raise ValueError(f"trials must be at least 1, got {trials!r}")
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must be from 0 to trials ({trials}), got {successes!r}")
    share = successes / trials
    z2 = z * z
    centre = (share + z2 / (2 * trials)) / (1 + z2 / trials)
    half = z / (1 + z2 / trials) * math.sqrt(share * (1 - share) / trials + z2 / (4 * trials * trials))
    return max(0.0, centre - half), min(1.0, centre + half)


def _row(variant: str, model: str | None, counts: list[VariantCounts]) -> VariantRow:
    broken = sum(c.broken for c in counts)
    decided = broken + sum(c.ignored for c in counts)
    low, high = wilson(broken, decided) if decided else (None, None)
    return VariantRow(
        variant=variant,
        model=model,
        reminders=sum(c.reminders for c in counts),
        decided=decided,
        broken=broken,
        share=broken / decided if decided else None,
        low=low,
        high=high,
        loops=sum(c.loops for c in counts),
        wasted_calls=sum(c.wasted_calls for c in counts),
        wasted_tokens=sum(c.wasted_tokens for c in counts),
    )


def variant_table(counts: Iterable[VariantCounts]) -> VariantTable:
    """The table of an experiment: a row per variant (its models summed) and per variant and model, each
    sorted by name (an unknown model last), and :func:`verdict` on the variants."""
    rows = list(counts)
    variants: dict[str, list[VariantCounts]] = {}
    models: dict[tuple[str, str | None], list[VariantCounts]] = {}
    for count in rows:
        variants.setdefault(count.variant, []).append(count)
        models.setdefault((count.variant, count.model), []).append(count)
    by_variant = tuple(_row(name, None, variants[name]) for name in sorted(variants))
    keys = sorted(models, key=lambda key: (key[0], key[1] is None, key[1] or ""))
    by_model = tuple(_row(variant, model, models[(variant, model)]) for variant, model in keys)
    return VariantTable(by_variant, by_model, verdict(by_variant))


def _percent(share: float | None) -> str:
    return "-" if share is None else f"{share * 100:.0f}%"


def verdict(rows: tuple[VariantRow, ...]) -> str:
    """One sentence: whether the variants' broken shares differ clearly at these counts (the best and the worst
    variant's 95% intervals do not overlap, and every variant has enough decided reminders each way)."""
    if not rows:
        return "No reminder carries a variant yet: set reminder_variants to compare wordings."
    if len(rows) == 1:
        return f"Only {rows[0].variant} has reminders so far: there is no other variant to compare it with."
    thin = [r for r in rows if r.decided < MIN_DECIDED or min(r.broken, r.decided - r.broken) < MIN_EACH_WAY]
    if thin:
        fewest = min(thin, key=lambda r: (r.decided, r.variant))
        return (
            f"Too few reminders to tell the variants apart: each needs {MIN_DECIDED} or more broken or ignored, "
            f"at least {MIN_EACH_WAY} of each ({fewest.variant} has {fewest.broken} broken of {fewest.decided})."
        )
    ranked = sorted(rows, key=lambda r: (-(r.share or 0.0), r.variant))
    best, worst = ranked[0], ranked[-1]
    shares = (
        f"{best.variant}'s reminders broke the loop {_percent(best.share)} of the time, "
        f"{worst.variant}'s {_percent(worst.share)}"
    )
    if (best.low or 0.0) > (worst.high or 0.0):
        return f"The difference is clear at these counts: {shares}, and their 95% intervals do not overlap."
    return f"The difference is not clear at these counts: {shares}, and their 95% intervals overlap."


def interval_text(row: VariantRow) -> str:
    """A row's broken share and its 95% interval, as the table prints them (``-`` when nothing is decided)."""
    if row.share is None or row.low is None or row.high is None:
        return "-"
    return f"{_percent(row.share)} ({_percent(row.low)}-{_percent(row.high)})"


def table_lines(table: VariantTable) -> list[str]:
    """The table as ``doctor --store`` prints it: a line per variant, then per variant and model, then the verdict."""
    header = (
        f"  {'variant':<16} {'model':<24} {'reminders':>9}  {'broke the loop (95% interval)':<30} "
        f"{'loops':>6} {'calls after':>11} {'tokens after':>13}"
    )
    lines = [
        "Outcome by variant (broke the loop: broken / (broken + ignored); after: the loop's first reminder)",
        header,
    ]
    for row in (*table.by_variant, *table.by_model):
        model = "all models" if row.model is None and row in table.by_variant else (row.model or "(unknown)")
        lines.append(
            f"  {row.variant[:16]:<16} {model[:24]:<24} {row.reminders:>9,}  {interval_text(row):<30} "
            f"{row.loops:>6,} {row.wasted_calls:>11,} {row.wasted_tokens:>13,}"
        )
    lines.append(table.verdict)
    return lines

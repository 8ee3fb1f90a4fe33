"""The reading of a wording experiment (``core.experiments``): the Wilson interval, the table and its verdict."""

from __future__ import annotations

import pytest

from otel_repeat_guard.core.experiments import (
    MIN_DECIDED,
    VariantCounts,
    interval_text,
    table_lines,
    variant_table,
    wilson,
)


def test_the_wilson_interval_matches_its_textbook_values() -> None:
    low, high = wilson(8, 10)
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)
    assert wilson(0, 10)[0] == 0.0 and round(wilson(0, 10)[1], 4) == 0.2775
    assert round(wilson(10, 10)[1], 9) == 1.0 and round(wilson(10, 10)[0], 4) == 0.7225
    assert [round(v, 4) for v in wilson(50, 100)] == [0.4038, 0.5962]


@pytest.mark.parametrize(("successes", "trials"), [(1, 0), (-1, 3), (4, 3)])
def test_the_wilson_interval_refuses_impossible_counts(successes: int, trials: int) -> None:
    with pytest.raises(ValueError, match="must be"):
        wilson(successes, trials)


def test_the_table_sums_models_per_variant_and_keeps_each_model_apart() -> None:
    table = variant_table(
        [
            VariantCounts("seed", "gpt", 10, 4, 5, 3, 7, 700),
            VariantCounts("seed", None, 2, 1, 1, 1, 1, 0),
            VariantCounts("redirect", "gpt", 6, 0, 0, 2, 0, 0),
        ]
    )
    assert [(r.variant, r.model, r.reminders, r.decided, r.broken) for r in table.by_variant] == [
        ("redirect", None, 6, 0, 0),
        ("seed", None, 12, 11, 5),
    ]
    assert [(r.variant, r.model) for r in table.by_model] == [("redirect", "gpt"), ("seed", "gpt"), ("seed", None)]
    seed = table.by_variant[1]
    assert (seed.loops, seed.wasted_calls, seed.wasted_tokens) == (4, 8, 700)
    assert seed.share == 5 / 11 and (seed.low, seed.high) == wilson(5, 11)
    assert table.by_variant[0].share is None and interval_text(table.by_variant[0]) == "-"
    assert interval_text(seed) == "45% (21%-72%)"
    lines = table_lines(table)
    assert lines[0].startswith("Outcome by variant") and lines[-1] == table.verdict
    assert "redirect         all models" in lines[2] and "seed             (unknown)" in lines[-2]


def test_the_verdict_says_no_experiment_one_variant_too_few_clear_or_not_clear() -> None:
    assert variant_table([]).verdict.startswith("No reminder carries a variant yet")
    assert variant_table([VariantCounts("seed", None, 50, 20, 30)]).verdict.startswith("Only seed has reminders")
    thin = variant_table([VariantCounts("seed", None, 50, 20, 30), VariantCounts("redirect", None, 9, 4, 5)])
    assert thin.verdict == (
        f"Too few reminders to tell the variants apart: each needs {MIN_DECIDED} or more broken or ignored, "
        "at least 5 of each (redirect has 4 broken of 9)."
    )
    lopsided = variant_table([VariantCounts("seed", None, 50, 20, 30), VariantCounts("redirect", None, 60, 58, 2)])
    assert lopsided.verdict.startswith("Too few reminders") and "(redirect has 58 broken of 60)" in lopsided.verdict
    clear = variant_table([VariantCounts("seed", None, 100, 20, 80), VariantCounts("redirect", None, 100, 60, 40)])
    assert clear.verdict == (
        "The difference is clear at these counts: redirect's reminders broke the loop 60% of the time, seed's 20%, "
        "and their 95% intervals do not overlap."
    )
    close = variant_table([VariantCounts("seed", None, 100, 40, 60), VariantCounts("redirect", None, 100, 48, 52)])
    assert close.verdict.startswith("The difference is not clear at these counts: redirect's reminders broke")
    assert close.verdict.endswith("and their 95% intervals overlap.")

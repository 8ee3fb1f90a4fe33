"""Loop detectors: small pure objects, one per loop shape, composed per agent run. No OTel imports.

Each sees the run's tracked calls in order (:class:`Call`: tool, arguments key, outcome key)
through one protocol (:class:`Detector`: ``observe(call) -> Detection | None``, ``continues``, and
``state()`` / ``restore()``, the plain data the Redis chain store moves), and keeps only bounded state:

- :class:`RepeatDetector`: the exact repeat, the chain every run keeps (the others are made for a
  run only when configured);
- :class:`CycleDetector`: ``A B A B A B``, periods 2 to ``max_cycle_period``;
- :class:`NoProgressDetector`: one tool, changing arguments, the same outcome;
- :class:`ParallelCollapse`: identical calls of one model step, counted once (not a loop
  shape but a filter in front of every detector).
"""

from collections.abc import Callable

from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.core.detectors.base import Call, Detection, Detector, Stateful
from otel_repeat_guard.core.detectors.cycle import CycleDetector
from otel_repeat_guard.core.detectors.no_progress import NoProgressDetector
from otel_repeat_guard.core.detectors.parallel import ParallelCollapse
from otel_repeat_guard.core.detectors.repeat import RepeatDetector


def detectors_for(config: GuardConfig) -> Callable[[], tuple[Detector, ...]] | None:
    """What makes a run's opt-in detectors, or None when none is configured."""
    cycle, no_progress = config.cycle_thresholds, config.no_progress_thresholds
    if not cycle and not no_progress:
        return None
    period = config.max_cycle_period

    def make() -> tuple[Detector, ...]:
        made: list[Detector] = []
        if cycle:
            made.append(CycleDetector(cycle, period))
        if no_progress:
            made.append(NoProgressDetector(no_progress))
        return tuple(made)

    return make


__all__ = [
    "Call",
    "CycleDetector",
    "Detection",
    "Detector",
    "NoProgressDetector",
    "ParallelCollapse",
    "RepeatDetector",
    "Stateful",
    "detectors_for",
]

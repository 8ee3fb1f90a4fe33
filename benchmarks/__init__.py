"""Side-by-side benchmarks for otel-repeat-guard: run with ``python -m benchmarks``."""

from benchmarks.builds import select

select()  # OTEL_REPEAT_GUARD_BENCH_BUILD: the pure or the compiled build, before anything imports the guard

"""Side-by-side benchmarks for otel-repeat-guard: run with ``python -m benchmarks``."""

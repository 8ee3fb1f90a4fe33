"""The pure core: configuration, canonical arguments, patterns, chains, detectors, reminders' texts and
rules. No OpenTelemetry import here, and every line is covered by the unit tests (the coverage gate)."""

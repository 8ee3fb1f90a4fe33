"""The ``otel-repeat-guard`` command line."""

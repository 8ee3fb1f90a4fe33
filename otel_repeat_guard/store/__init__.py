"""The embedded event store: a SQLite span exporter and the schema it writes.

``SQLiteSpanExporter`` is loaded on first use (PEP 562): the store's own modules, the schema and the rows, import no
OpenTelemetry, and the Claude Code command hook writes through them without it. This package is never compiled.
"""

from typing import TYPE_CHECKING, Any

from otel_repeat_guard.store.schema import (
    DB_ENV,
    DEFAULT_DB,
    SCHEMA_VERSION,
    CorruptStoreError,
    MissingDatabaseError,
    SchemaError,
    StoreAccessError,
    StoreError,
    default_db_path,
    open_for_reading,
    open_for_writing,
    store_error,
)

__all__ = [
    "DB_ENV",
    "DEFAULT_DB",
    "SCHEMA_VERSION",
    "CorruptStoreError",
    "MissingDatabaseError",
    "SQLiteSpanExporter",
    "SchemaError",
    "StoreAccessError",
    "StoreError",
    "default_db_path",
    "open_for_reading",
    "open_for_writing",
    "store_error",
]

if TYPE_CHECKING:
    from otel_repeat_guard.store.exporter import SQLiteSpanExporter


def __getattr__(name: str) -> Any:
    if name == "SQLiteSpanExporter":
        from otel_repeat_guard.store.exporter import SQLiteSpanExporter  # noqa: PLC0415 - loaded on first use

        return SQLiteSpanExporter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The embedded event store: a SQLite span exporter and the schema it writes."""

from otel_repeat_guard.store.exporter import SQLiteSpanExporter
from otel_repeat_guard.store.schema import (
    DB_ENV,
    DEFAULT_DB,
    SCHEMA_VERSION,
    MissingDatabaseError,
    SchemaError,
    StoreError,
    default_db_path,
    open_for_reading,
    open_for_writing,
)

__all__ = [
    "DB_ENV",
    "DEFAULT_DB",
    "SCHEMA_VERSION",
    "MissingDatabaseError",
    "SQLiteSpanExporter",
    "SchemaError",
    "StoreError",
    "default_db_path",
    "open_for_reading",
    "open_for_writing",
]

"""The embedded event store: a SQLite span exporter and the schema it writes."""

from otel_repeat_guard.store.exporter import SQLiteSpanExporter
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

"""Reading the OpenTelemetry Collector's ClickHouse tables: the contrib ``clickhouseexporter``'s ``otel_traces``.

- ``target``: a store URL (``clickhouse://user@host:8123/db?table=otel_traces``, ``chdb://DIR``) and its
  credentials, which come from the environment or a file, never from the command line;
- ``client``: the two engines that answer the same SQL, a server through ``clickhouse-connect`` and chdb
  (ClickHouse's engine embedded in Python), with one-line errors;
- ``table``: the exporter's table as it creates it, and its mapping of a span onto a row (for tests and
  benchmarks that fill a table the way the Collector would);
- ``calls``: the SQL that reads tool calls and model calls out of that table, as the store reads them;
- ``reader``: the dashboard's questions, answered from that table (read only: nothing is written there).

Both client libraries are optional (the ``clickhouse`` extra): nothing here imports them until it connects.
"""

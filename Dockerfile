# The dashboard (and demo agent) image: otel-repeat-guard with its dashboard, ingest and OTLP extras (and the ClickHouse server client).
FROM python:3.11.10-slim-bookworm

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1 \
    OTEL_REPEAT_GUARD_DB=/var/lib/repeat-guard/repeat-guard.db

WORKDIR /src
# hatch_build.py: the wheel's mypyc hook; this slim image has no C compiler, so it builds the pure-Python package.
COPY pyproject.toml README.md hatch_build.py ./
COPY otel_repeat_guard ./otel_repeat_guard
RUN pip install '.[dashboard,ingest,otlp,clickhouse-server]' && mkdir -p /var/lib/repeat-guard
COPY deploy/dashboard-entrypoint.sh /usr/local/bin/dashboard-entrypoint.sh

EXPOSE 8501
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=2)"]
ENTRYPOINT ["dashboard-entrypoint.sh"]

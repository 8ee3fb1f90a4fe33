# The dashboard (and demo agent) image: otel-repeat-guard with its dashboard, ingest and OTLP extras (and the ClickHouse server client).
FROM python:3.11.10-slim-bookworm

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1 \
    OTEL_REPEAT_GUARD_DB=/var/lib/repeat-guard/repeat-guard.db

WORKDIR /src
# hatch_build.py: the wheel's build hook; a source build is pure Python (OTEL_REPEAT_GUARD_COMPILE=1 would compile).
COPY pyproject.toml README.md hatch_build.py ./
COPY otel_repeat_guard ./otel_repeat_guard
# The user: the Collector's uid and gid (10001 in otel/opentelemetry-collector-contrib), because the file exporter
# can write owner-only files (0600), which only that uid reads. The store's folder is that user's, so a fresh
# dashboard-data volume (Docker fills it from the image) is writable; volume-init hands an older one over.
RUN pip install '.[dashboard,ingest,otlp,clickhouse-server]' \
 && groupadd --gid 10001 repeat-guard \
 && useradd --uid 10001 --gid 10001 --create-home --shell /usr/sbin/nologin repeat-guard \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/repeat-guard
COPY deploy/dashboard-entrypoint.sh /usr/local/bin/dashboard-entrypoint.sh
USER 10001:10001

EXPOSE 8501
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=2)"]
ENTRYPOINT ["dashboard-entrypoint.sh"]

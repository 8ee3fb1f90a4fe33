# The two quick-start commands: `make demo` (the main job) and `make test` (everything CI runs).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The oldest opentelemetry-sdk minor we support: the core suite runs against it too.
SDK_OLDEST ?= 1.40.*
VENV_OLDEST ?= .venv-sdk-oldest
CORE_MODULES := otel_repeat_guard/config.py,otel_repeat_guard/patterns.py,otel_repeat_guard/canonical.py,otel_repeat_guard/chains.py,otel_repeat_guard/reminders.py

# Debian's browser for the real-browser dashboard test (Playwright never downloads one here).
CHROMIUM ?= /usr/bin/chromium
DB ?= repeat-guard.db

.PHONY: test lint typecheck unit sdk-oldest clean demo dashboard chromium screenshot benchmark

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,dashboard,test]'
	touch $@

$(BIN)/.installed-dashboard: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dashboard]'
	touch $@

# The quick start: a simulated multi-agent workload through the guard into $(DB), then the dashboard.
demo: $(BIN)/.installed-dashboard
	$(BIN)/otel-repeat-guard demo --db $(DB) --dashboard

dashboard: $(BIN)/.installed-dashboard
	$(BIN)/otel-repeat-guard dashboard --db $(DB)

# Installs Debian's chromium only when it is absent (CI runs as root on a fresh machine).
chromium:
	@test -x $(CHROMIUM) || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium; }

$(VENV_OLDEST)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV_OLDEST)
	$(VENV_OLDEST)/bin/pip install --quiet --upgrade pip
	$(VENV_OLDEST)/bin/pip install --quiet -e '.[dev]' 'opentelemetry-sdk==$(SDK_OLDEST)' 'opentelemetry-api==$(SDK_OLDEST)'
	touch $@

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(BIN)/.installed
	$(BIN)/mypy --strict otel_repeat_guard

unit: $(BIN)/.installed chromium
	$(BIN)/python -m pytest --cov --cov-report=term-missing:skip-covered; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing, since nothing was proven" >&2; exit 1; fi; exit $$rc
	$(BIN)/python -m coverage report --include='$(CORE_MODULES)' --fail-under=100 --show-missing

sdk-oldest: $(VENV_OLDEST)/.installed
	$(VENV_OLDEST)/bin/python -c 'import opentelemetry.sdk.version as v; print("core suite on opentelemetry-sdk", v.__version__)'
	$(VENV_OLDEST)/bin/python -m pytest -q tests/guard

test: lint typecheck unit sdk-oldest

# Refreshes docs/dashboard.png from the browser test.
screenshot: $(BIN)/.installed chromium
	REPEAT_GUARD_SCREENSHOT=$(CURDIR)/docs/dashboard.png $(BIN)/python -m pytest -q tests/dashboard/test_browser.py

# 1,000,000 tool calls: the time of each dashboard query and of a cold page run.
benchmark: $(BIN)/.installed
	$(BIN)/python benchmarks/dashboard_queries.py

clean:
	rm -rf $(VENV) $(VENV_OLDEST) .coverage .pytest_cache .mypy_cache .ruff_cache

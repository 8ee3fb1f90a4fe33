# The two quick-start commands: `make demo` (the main job) and `make test` (everything CI runs).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The oldest opentelemetry-sdk minor we support: the core suite runs against it too.
SDK_OLDEST ?= 1.40.*
VENV_OLDEST ?= .venv-sdk-oldest
CORE_MODULES := otel_repeat_guard/config.py,otel_repeat_guard/patterns.py,otel_repeat_guard/canonical.py,otel_repeat_guard/chains.py,otel_repeat_guard/reminders.py

.PHONY: test lint typecheck unit sdk-oldest clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

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

unit: $(BIN)/.installed
	$(BIN)/python -m pytest --cov --cov-report=term-missing:skip-covered; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing, since nothing was proven" >&2; exit 1; fi; exit $$rc
	$(BIN)/python -m coverage report --include='$(CORE_MODULES)' --fail-under=100 --show-missing

sdk-oldest: $(VENV_OLDEST)/.installed
	$(VENV_OLDEST)/bin/python -c 'import opentelemetry.sdk.version as v; print("core suite on opentelemetry-sdk", v.__version__)'
	$(VENV_OLDEST)/bin/python -m pytest -q tests/guard

test: lint typecheck unit sdk-oldest

clean:
	rm -rf $(VENV) $(VENV_OLDEST) .coverage .pytest_cache .mypy_cache .ruff_cache

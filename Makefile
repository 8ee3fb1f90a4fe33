# The two quick-start commands: `make demo` (the main job) and `make test` (everything CI runs).
PYTHON ?= python3
# The editable install: always pure Python (OTEL_REPEAT_GUARD_PURE=1 also keeps mypy out of its build).
VENV ?= .venv
BIN := $(VENV)/bin
PURE := OTEL_REPEAT_GUARD_PURE=1
# The compiled build: the wheel, its core compiled by mypyc (hatch_build.py) because COMPILE asks for it,
# installed (not editable) into its own virtualenv. `make test` runs the suite on both builds, `make bench`
# the benchmarks on this one. REQUIRE_COMPILED makes a compile that fails an error, not a pure-Python wheel.
VENV_COMPILED ?= .venv-compiled
CBIN := $(VENV_COMPILED)/bin
COMPILE := OTEL_REPEAT_GUARD_COMPILE=1 OTEL_REPEAT_GUARD_REQUIRE_COMPILED=1
# `make demo` and `make dashboard`: the package as a user's `pip install` from the checkout builds it, pure
# Python (seconds), with the dashboard extra. OTEL_REPEAT_GUARD_COMPILE=1 in the environment compiles it.
VENV_DEMO ?= .venv-demo
DBIN := $(VENV_DEMO)/bin
PACKAGE_SOURCES := $(shell find otel_repeat_guard -name '*.py' -not -path '*/__pycache__/*')
# The oldest opentelemetry-sdk minor we support: the core suite runs against it too.
SDK_OLDEST ?= 1.40.*
VENV_OLDEST ?= .venv-sdk-oldest
# The trace backend the OTLP test exports to: Arize Phoenix, in its own virtualenv (it is large).
VENV_PHOENIX ?= .venv-phoenix
PHOENIX_VERSION ?= 20.26.1
# Extras the main virtualenv needs for the whole suite.
EXTRAS ?= dev,dashboard,test,otlp,ingest,backends-test,redis,clickhouse
CORE_MODULES := otel_repeat_guard/core/*.py,otel_repeat_guard/core/detectors/*.py

# Debian's browser for the real-browser dashboard test (Playwright never downloads one here).
CHROMIUM ?= /usr/bin/chromium
DB ?= repeat-guard.db
# The dashboard's port for `make demo` and `make dashboard` (a taken one is refused in one line, exit 2).
PORT ?= 8501

# Agent-framework integration tests: one virtualenv per group of frameworks that install together
# (google-adk pins opentelemetry <= 1.44; strands pins 1.45.1; each requirements file says why it
# stands alone). `make -j2 integration` installs and runs groups in parallel; `make test` runs two jobs at a time.
VENV_INT ?= .venv-int
INTEGRATION_GROUPS := agents langchain adk oi agno msft crewai mcp mcp-openllmetry clients claude
INTEGRATION_TESTS_agents := tests/integrations/test_pydantic_ai.py tests/integrations/test_openai_agents.py tests/integrations/test_openai_agents_progress.py tests/integrations/test_strands.py tests/integrations/test_strands_adapter.py tests/integrations/test_client_adapter_double_delivery.py tests/integrations/test_examples.py
INTEGRATION_TESTS_langchain := tests/integrations/test_langchain_openinference.py tests/integrations/test_langchain_openllmetry.py tests/integrations/test_langchain_undelivered.py tests/integrations/test_examples.py
INTEGRATION_TESTS_adk := tests/integrations/test_google_adk.py tests/integrations/test_google_adk_adapter.py
INTEGRATION_TESTS_oi := tests/integrations/test_smolagents.py tests/integrations/test_llama_index.py tests/integrations/test_smolagents_adapter.py tests/integrations/test_llama_index_adapter.py
INTEGRATION_TESTS_agno := tests/integrations/test_agno.py tests/integrations/test_haystack.py tests/integrations/test_haystack_adapter.py tests/integrations/test_agno_adapter.py
INTEGRATION_TESTS_msft := tests/integrations/test_autogen.py tests/integrations/test_semantic_kernel.py tests/integrations/test_autogen_adapter.py tests/integrations/test_semantic_kernel_adapter.py tests/integrations/test_client_adapter_msft.py
INTEGRATION_TESTS_crewai := tests/integrations/test_crewai_openinference.py tests/integrations/test_crewai_openllmetry.py tests/integrations/test_crewai_adapter.py tests/integrations/test_examples.py
INTEGRATION_TESTS_mcp := tests/integrations/test_mcp_builtin.py
INTEGRATION_TESTS_mcp-openllmetry := tests/integrations/test_mcp_openllmetry.py tests/integrations/test_genai_invocations.py
INTEGRATION_TESTS_clients := tests/integrations/test_client_adapters.py tests/integrations/test_client_adapters_whole_chain.py tests/integrations/test_examples.py
# The Claude Code CLI that claude-agent-sdk's wheel bundles, offline against tests/integrations/fake_anthropic.py.
INTEGRATION_TESTS_claude := tests/integrations/test_claude_agent_sdk.py tests/integrations/test_claude_code_hook.py tests/integrations/test_examples.py

.PHONY: redis check test test-all lint typecheck unit unit-compiled sdk-oldest backends prometheus chromium integration integration-claude-compiled \
	$(addprefix integration-,$(INTEGRATION_GROUPS)) demo dashboard screenshot benchmark bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(PURE) $(BIN)/pip install --quiet -e '.[$(EXTRAS)]'
	touch $@

# The compiled wheel, built once (the compile switch and the requirement set: a compile that fails fails
# loudly), installed, then the dependencies of $(EXTRAS). Each step says what it does.
$(CBIN)/.installed: pyproject.toml hatch_build.py $(PACKAGE_SOURCES)
	@echo "==> creating the virtualenv $(VENV_COMPILED)"
	test -x $(CBIN)/python || $(PYTHON) -m venv $(VENV_COMPILED)
	@echo "==> upgrading pip"
	$(CBIN)/pip install --quiet --upgrade pip
	rm -rf $(VENV_COMPILED)/dist
	@echo "==> building the wheel: mypyc compiles the core (three to five minutes on 2 cores)"
	$(COMPILE) $(CBIN)/pip wheel --quiet --no-deps --wheel-dir $(VENV_COMPILED)/dist .
	@echo "==> installing the wheel"
	$(CBIN)/pip install --quiet --force-reinstall --no-deps $(VENV_COMPILED)/dist/*.whl
	@echo "==> installing its dependencies: [$(EXTRAS)]"
	$(CBIN)/pip install --quiet "$$(ls $(VENV_COMPILED)/dist/*.whl)[$(EXTRAS)]"
	$(CBIN)/otel-repeat-guard --version
	touch $@

# Debian's Prometheus server and promtool, for the metrics test and the config check.
prometheus:
	@if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then \
	  apt-get install -y --no-install-recommends prometheus >/dev/null 2>&1 \
	  || { apt-get update -qq && apt-get install -y --no-install-recommends prometheus; }; \
	fi
	@prometheus --version 2>&1 | head -1

$(VENV_PHOENIX)/.installed:
	$(PYTHON) -m venv $(VENV_PHOENIX)
	$(VENV_PHOENIX)/bin/pip install --quiet --upgrade pip
	$(VENV_PHOENIX)/bin/pip install --quiet 'arize-phoenix==$(PHOENIX_VERSION)'
	touch $@

backends: prometheus redis $(VENV_PHOENIX)/.installed

# What `pip install '.[dashboard]'` gives a user: pure Python unless OTEL_REPEAT_GUARD_COMPILE=1 is set
# (pip reinstalls a local folder every time, so an edited source is picked up). pip names each package as it
# fetches it, then unpacks them all without a word (half a minute for pyarrow and streamlit on a busy
# machine): a line every 10 s says it is still at work, so the first `make demo` is never silent for long.
DEMO_PIP := $(DBIN)/pip install --progress-bar on --disable-pip-version-check '.[dashboard]'
$(DBIN)/.installed: pyproject.toml hatch_build.py $(PACKAGE_SOURCES)
	@echo "==> creating the virtualenv $(VENV_DEMO)"
	test -x $(DBIN)/python || $(PYTHON) -m venv $(VENV_DEMO)
	@echo "==> installing otel-repeat-guard[dashboard] from this checkout (pure Python; OTEL_REPEAT_GUARD_COMPILE=1 compiles its core)"
	@echo "$(DEMO_PIP)"
	@( n=0; while sleep 10; do n=$$((n + 10)); echo "    ... pip is still at work ($$n s)"; done ) & beat=$$!; \
	  $(DEMO_PIP); rc=$$?; kill $$beat; exit $$rc
	$(DBIN)/otel-repeat-guard --version
	touch $@

# The quick start: a simulated multi-agent workload through the guard into $(DB), then the dashboard.
# A busy port's hint names PORT= (OTEL_REPEAT_GUARD_PORT_SETTING), not the CLI's --port, which make sets here.
demo: $(DBIN)/.installed
	OTEL_REPEAT_GUARD_PORT_SETTING='make $@ PORT=…' $(DBIN)/otel-repeat-guard demo --db $(DB) --dashboard --port $(PORT)

dashboard: $(DBIN)/.installed
	OTEL_REPEAT_GUARD_PORT_SETTING='make $@ PORT=…' $(DBIN)/otel-repeat-guard dashboard --db $(DB) --port $(PORT)

# Debian's Redis server, for the distributed-runs tests (they start it on a free port themselves).
redis: | prometheus
	@command -v redis-server >/dev/null || apt-get install -y --no-install-recommends redis-server >/dev/null 2>&1 \
	  || { apt-get update -qq && apt-get install -y --no-install-recommends redis-server; }
	@redis-server --version

# Installs Debian's chromium only when it is absent (CI runs as root on a fresh machine).
# After prometheus: two apt-get runs at once (make -j) would fight over dpkg's lock.
chromium: | prometheus redis
	@test -x $(CHROMIUM) || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium; }

$(VENV_OLDEST)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV_OLDEST)
	$(VENV_OLDEST)/bin/pip install --quiet --upgrade pip
	$(PURE) $(VENV_OLDEST)/bin/pip install --quiet -e '.[dev]' 'opentelemetry-sdk==$(SDK_OLDEST)' 'opentelemetry-api==$(SDK_OLDEST)'
	touch $@

$(VENV_INT)-%/.installed: pyproject.toml tests/integrations/requirements-%.txt
	$(PYTHON) -m venv $(VENV_INT)-$*
	$(VENV_INT)-$*/bin/pip install --quiet --upgrade pip
	$(PURE) $(VENV_INT)-$*/bin/pip install --quiet -e '.[dev]' -r tests/integrations/requirements-$*.txt
	touch $@

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(BIN)/.installed
	$(BIN)/mypy --strict otel_repeat_guard benchmarks otel_repeat_guard_entry.py

# The edit-test loop, under a minute: lint, types and the fast unit tests (the guard, its readers,
# doctor). No root, no network, no browsers, no backends. `make test` stays the full CI run.
CHECK_TESTS := tests/guard tests/ingest/test_doctor.py tests/ingest/test_otlp_json.py
check: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict otel_repeat_guard benchmarks otel_repeat_guard_entry.py
	$(BIN)/python -m pytest -q -p no:cacheprovider -x $(CHECK_TESTS)

# The whole suite but the framework integrations: a missing Prometheus or Phoenix fails the run instead of skipping.
# `unit` runs it on the editable, pure-Python install (with coverage), `unit-compiled` on the compiled wheel.
# OTEL_REPEAT_GUARD_EXPECT_BUILD makes tests/packaging fail if the run is not on the build it names.
unit: $(BIN)/.installed backends chromium
	OTEL_REPEAT_GUARD_REQUIRE_BACKENDS=1 PHOENIX_BIN=$(VENV_PHOENIX)/bin/phoenix OTEL_REPEAT_GUARD_EXPECT_BUILD=pure \
	  $(BIN)/python -m pytest --ignore=tests/integrations --cov --cov-report=term-missing:skip-covered; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing, since nothing was proven" >&2; exit 1; fi; exit $$rc
	$(BIN)/python -m coverage report --include='$(CORE_MODULES)' --fail-under=100 --show-missing

# The installed package, not the source tree, must be the one imported: pytest's own script (not
# `python -m`, which puts the checkout first on sys.path), --import-mode=append (the checkout goes
# last, for `tests` only), and PYTHONSAFEPATH=1 for the tests' `python -m` subprocesses.
# The compiled code is invisible to coverage: `unit` measures it on the same source.
unit-compiled: $(CBIN)/.installed backends chromium
	OTEL_REPEAT_GUARD_REQUIRE_BACKENDS=1 PHOENIX_BIN=$(VENV_PHOENIX)/bin/phoenix OTEL_REPEAT_GUARD_EXPECT_BUILD=compiled \
	  PYTHONSAFEPATH=1 $(CBIN)/pytest -p no:cacheprovider --import-mode=append --ignore=tests/integrations; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing, since nothing was proven" >&2; exit 1; fi; exit $$rc

# Pure Python (an editable install): the compiled build is tested on the current SDK only.
sdk-oldest: $(VENV_OLDEST)/.installed
	$(VENV_OLDEST)/bin/python -c 'import opentelemetry.sdk.version as v; print("core suite on opentelemetry-sdk", v.__version__)'
	OTEL_REPEAT_GUARD_EXPECT_BUILD=pure $(VENV_OLDEST)/bin/python -m pytest -q tests/guard tests/packaging/test_build_mode.py

# OTEL_REPEAT_GUARD_REQUIRE_FRAMEWORKS=1: a framework that fails to import fails the run instead of skipping.
# OTEL_REPEAT_GUARD_INTEGRATION_GROUP names the group: tests/integrations/test_examples.py runs its examples.
# (An explicit rule per group: make never applies pattern rules to .PHONY targets.)
define integration_rule
integration-$(1): $(VENV_INT)-$(1)/.installed
	OTEL_REPEAT_GUARD_REQUIRE_FRAMEWORKS=1 OTEL_REPEAT_GUARD_INTEGRATION_GROUP=$(1) $(VENV_INT)-$(1)/bin/python -m pytest -q -p no:cacheprovider $(INTEGRATION_TESTS_$(1))
endef
$(foreach group,$(INTEGRATION_GROUPS),$(eval $(call integration_rule,$(group))))

integration: $(addprefix integration-,$(INTEGRATION_GROUPS))

# The Claude Code hook under faults (issue 41) on the compiled build too: the claude group's requirements beside
# the compiled wheel, which is imported rather than the checkout (as unit-compiled does).
$(VENV_INT)-claude-compiled/.installed: $(CBIN)/.installed tests/integrations/requirements-claude.txt
	$(PYTHON) -m venv $(VENV_INT)-claude-compiled
	$(VENV_INT)-claude-compiled/bin/pip install --quiet --upgrade pip
	$(VENV_INT)-claude-compiled/bin/pip install --quiet "$$(ls $(VENV_COMPILED)/dist/*.whl)[dev]" -r tests/integrations/requirements-claude.txt
	touch $@

integration-claude-compiled: $(VENV_INT)-claude-compiled/.installed
	OTEL_REPEAT_GUARD_REQUIRE_FRAMEWORKS=1 OTEL_REPEAT_GUARD_INTEGRATION_GROUP=claude PYTHONSAFEPATH=1 \
	  $(VENV_INT)-claude-compiled/bin/python -m pytest -q -p no:cacheprovider --import-mode=append tests/integrations/test_claude_code_hook.py

# `make test` is what CI runs (.ci/run): two jobs at a time on this 2-core machine, each job's output
# kept together. TEST_JOBS=1 runs it serially.
TEST_JOBS ?= 2
test:
	$(MAKE) -j$(TEST_JOBS) --output-sync=target test-all

test-all: lint typecheck unit unit-compiled sdk-oldest integration integration-claude-compiled

# Refreshes docs/screenshots/ (each dashboard page at 1440 px on the demo store) from the browser test.
screenshot: $(BIN)/.installed chromium
	REPEAT_GUARD_SCREENSHOTS=$(CURDIR)/docs/screenshots $(BIN)/python -m pytest -q tests/dashboard/test_browser_layout.py

# 1,000,000 tool calls: the time of each dashboard query and of a cold page run; then a fresh dashboard
# page against a bare Streamlit page in chromium, side by side (goal: within 0.5 s; `make chromium` first).
benchmark: $(BIN)/.installed
	$(BIN)/python benchmarks/dashboard_queries.py
	$(BIN)/python benchmarks/dashboard_page.py

# The guard's cost, side by side with its baselines (not part of `make test`): see benchmarks/RESULTS.md.
# Both builds, one after the other, in one table; BENCH_FLAGS=--instructions adds the valgrind counts.
bench: $(CBIN)/.installed
	$(CBIN)/python -m benchmarks.side_by_side $(BENCH_FLAGS)

clean:
	rm -rf $(VENV) $(VENV_COMPILED) $(VENV_DEMO) $(VENV_OLDEST) $(VENV_PHOENIX) $(addprefix $(VENV_INT)-,$(INTEGRATION_GROUPS) claude-compiled) .coverage .pytest_cache .mypy_cache .ruff_cache

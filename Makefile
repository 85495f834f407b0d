# Two commands: `make run` (everything, embedded, in the foreground) and `make test`; while
# working, `make test-fast` (the inner loop) or `make test-unit` (database-free, no servers).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
export PORT
# Test processes in parallel (pytest-xdist): each starts its own PostgreSQL, Redis and test
# database (tests/conftest.py), and takes whole files so module fixtures are built once, the
# longest first (tests/conftest.py's order; xdist's own would start them last).
TEST_WORKERS ?= 3
# Let Python keep compiled bytecode (and pytest its rewritten test modules) between runs, even
# where the environment switches that off: every test process and every `manage.py` a test
# starts would otherwise compile the tree again (`make test-unit`: 89 → 61 s).
unexport PYTHONDONTWRITEBYTECODE
XDIST := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
# Each test target and `lint` end by printing their wall time (CI runs lint, then test).
TIMED = start=$$(date +%s); trap 'echo "make $@: $$(( $$(date +%s) - start )) s wall"' EXIT;

.PHONY: run test test-long test-fast test-unit golden-vectors lint services-start services-stop services-status eval clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Reinstall when pyproject.toml changes.
$(VENV)/.installed-run: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed-run

run: $(VENV)/.installed-run
	$(BIN)/python manage.py runstack --port $(PORT)

# Everything but the `long` measurements, with per-test timeouts (pyproject.toml,
# tests/conftest.py) and the 25 slowest.
test: $(VENV)/.installed-dev
	@$(TIMED) $(BIN)/python -m pytest $(XDIST) -m "not long" --durations=25 $(PYTEST_ARGS)

# The end-to-end measurements of ten minutes or more (e.g. a fresh ingest of this repository
# and its staleness scan).
test-long: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -m long -s $(PYTEST_ARGS)

# The inner loop: the database-free tests (marked `unit` by tests/conftest.py) and the
# integration tests that are neither `slow` (real workers, servers or encoder processes,
# exhaustive sweeps) nor `browser`.
test-fast: $(VENV)/.installed-dev
	@$(TIMED) $(BIN)/python -m pytest $(XDIST) -m "not slow and not browser" --durations=10 \
		$(PYTEST_ARGS)

# The database-free tests alone: no server starts.
test-unit: $(VENV)/.installed-dev
	@$(TIMED) $(BIN)/python -m pytest -n 2 -m "unit and not slow and not browser" $(PYTEST_ARGS)

# Record what the model gives for the golden corpus (tests/golden/vectors.npz, read by
# tests/embedding_memo.py), so the golden gate embeds only what changed since: run it when the
# gate's embedding time has grown (about 8 minutes: every text is embedded again).
golden-vectors: $(VENV)/.installed-dev
	CONTEXTS_TEST_RECORD_VECTORS=$(CURDIR)/tests/golden/vectors.npz \
		$(BIN)/python -m pytest tests/evaluation/test_golden.py -s $(PYTEST_ARGS)

# Style and the import contracts (pyproject.toml [tool.importlinter]: the layers, ADR 0013).
lint: $(VENV)/.installed-dev
	@$(TIMED) $(BIN)/ruff check . && $(BIN)/lint-imports

services-start services-stop services-status: $(VENV)/.installed-run
	$(BIN)/python manage.py services $(subst services-,,$@)

clean:
	rm -rf var/staticfiles .pytest_cache

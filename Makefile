# latscope: the two commands a user needs are `make demo` and `make test` (see README.md).
# Everything installs into a local virtual environment; no root is needed.

PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed
CBUILD  = build/zephyr-app-lib

.PHONY: all install demo test test-python test-quick test-c bench lint clean

all: demo

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "latscope: installing into $(VENV) (one time; later runs reuse it)"
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@touch $@

install: $(STAMP)

# The main job on the built-in simulated instrument: captures of the paper's configurations,
# then the comparison table and report.
demo: $(STAMP)
	$(VENV)/bin/latscope demo

test: test-c test-python

# One pytest worker per core (pytest-xdist), a test file's tests on one worker, so module-scoped
# builds (bitstreams, gate-level netlists, Verilator models) are made once: the slow tests are
# mostly single-threaded builds and simulations, and in series they would not fit CI's budget.
# Shared build caches take a file lock (gateware/verilator.py).
test-python: $(STAMP)
	$(PY) -m pytest -n auto --dist loadfile --durations=25

# The fast subset for the edit-test loop (about a minute); `make test` also runs the slow tests:
# bitstream builds, the 1e8-cycle soak, the 1e5-case decoder fuzz, 250 kill -9 trials.
test-quick: $(STAMP)
	$(PY) -m pytest -m "not slow"

# The Zephyr app's portable core, built and unit-tested on the host (no Zephyr needed).
test-c:
	cmake -S zephyr-app/lib/latscope_core -B $(CBUILD) -DCMAKE_BUILD_TYPE=Debug -DLATSCOPE_CORE_TESTS=ON > /dev/null
	cmake --build $(CBUILD) -j2 > /dev/null
	cd $(CBUILD) && ctest --output-on-failure

bench: $(STAMP)
	$(VENV)/bin/latscope bench

lint: $(STAMP)
	$(VENV)/bin/ruff check latscope gateware capture analysis

clean:
	rm -rf build

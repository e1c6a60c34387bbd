# Every target bootstraps .venv from nothing when it is missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The test tools and the GPU adapter's torch (make test, make bench, make mutation).
STAMP := $(VENV)/.kvpure-installed
# kvpure and its core dependencies alone, no extras, no torch (make demo).
DEMO_STAMP := $(VENV)/.kvpure-core-installed
PIP := $(PY) -m pip install -q --disable-pip-version-check -c constraints.txt

.PHONY: demo test bench lint typecheck unit clean mutation

$(DEMO_STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) -e .
	touch $(DEMO_STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) -e '.[dev,gpu]'
	touch $(STAMP) $(DEMO_STAMP)

# The optional C accelerators (prompt hashing, the free queue's batches, event decoding),
# built in place (optional: without a compiler or OpenSSL's headers kvpure runs its
# pure-Python paths).
EXT_STAMP := src/kvpure/hashing/.chain-built
$(EXT_STAMP): $(DEMO_STAMP) $(wildcard src/kvpure/hashing/csrc/*) $(wildcard src/kvpure/csrc/*) $(wildcard src/kvpure/events/csrc/*) setup.py
	-$(PY) setup.py -q build_ext --inplace
	touch $(EXT_STAMP)

# Byte code written once at setup: the CLI starts in a third of the time where it is cached,
# and Python reads it even where PYTHONDONTWRITEBYTECODE keeps it from writing any.
demo: $(EXT_STAMP)
	$(PY) -m compileall -q src/kvpure src/kvpure_gpu
	$(PY) -m kvpure demo
	@echo
	@echo "kvpure is installed in $(VENV). Run it as $(VENV)/bin/kvpure, or first:"
	@echo "  . $(VENV)/bin/activate"

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench

typecheck: $(STAMP) $(EXT_STAMP)
	$(VENV)/bin/mypy

unit: $(STAMP) $(EXT_STAMP)
	$(PY) -m compileall -q src/kvpure src/kvpure_gpu
	$(VENV)/bin/pytest
	# the pure-Python hashing and event-decoding paths again, the extensions switched off
	KVPURE_TEST_NO_EXTENSION=1 $(VENV)/bin/pytest -p no:randomly tests/test_hash_golden.py tests/test_hash_properties.py tests/test_hash_fast_prompt.py tests/test_hash_accel.py tests/test_hash_accel_decode.py tests/test_hash_request_state.py tests/test_events_wire.py tests/test_events_malformed.py tests/test_events_roundtrip.py tests/test_events_accel.py tests/test_free_queue.py tests/test_free_queue_edges.py

test: lint typecheck unit

bench: $(STAMP) $(EXT_STAMP)
	@for f in bench/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

# Mutation testing of the core modules (docs/mutation.md): slow, one core, not part of
# `make test`. MODULES narrows it, e.g. `make mutation MODULES=free_queue`.
MODULES ?=
mutation: $(STAMP)
	nice $(PY) tools/mutation/run.py $(MODULES)

clean:
	rm -rf $(VENV) $(EXT_STAMP) src/kvpure/hashing/*.so src/kvpure/*.so src/kvpure/events/*.so build .mypy_cache .pytest_cache .ruff_cache .hypothesis .mutation

# ICE: `make demo` and `make test` are all a newcomer types; both set up what is missing first.
VENV    ?= .venv
PY      := $(VENV)/bin/python
PYTEST  := $(PY) -m pytest
P4C     ?= p4c-bm2-ss
BUILD   := build
P4SRC   := $(wildcard p4src/*.p4 p4src/include/*.p4 p4src/include/control/*.p4)

.PHONY: setup test test-unit test-dataplane test-e2e demo bench p4 lint clean

setup:
	@scripts/setup.sh

# All three tiers in one pytest run (unit, data-plane, end-to-end).
test: setup
	$(PYTEST) tests

test-unit: setup
	$(PYTEST) tests/unit

test-dataplane: setup
	$(PYTEST) tests/dataplane

test-e2e: setup
	$(PYTEST) tests/e2e

demo: setup
	$(PY) -m icefabric.control.demo

bench: setup
	$(PY) -m icefabric.bench

# Compile p4src/ with real p4c when it is installed; the embedded target needs no compile step.
p4:
	@if command -v $(P4C) >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory $(BUILD)/ice.json; \
	else \
		echo "p4: $(P4C) not on PATH; skipping (the embedded target runs p4src/ from source)"; \
	fi

$(BUILD)/%.json $(BUILD)/%.p4info.txtpb: p4src/%.p4 $(P4SRC)
	@mkdir -p $(BUILD)
	$(P4C) --arch v1model --std p4-16 -o $(BUILD)/$*.json \
		--p4runtime-files $(BUILD)/$*.p4info.txtpb $<

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	scripts/typecheck.sh

clean:
	rm -rf $(BUILD) .pytest_cache .mypy_cache .ruff_cache
	find . -name __pycache__ -type d -not -path "./$(VENV)/*" -prune -exec rm -rf {} +

# ICE: `make demo` and `make test` are all a newcomer types; both set up what is missing first.
VENV    ?= .venv
PY      := $(VENV)/bin/python
PYTEST  := $(PY) -m pytest
BUILD   := build

.PHONY: setup test test-unit test-hostile test-dataplane test-e2e test-tofino demo bench p4 p4-tna p4-py lint clean

setup:
	@scripts/setup.sh

# All three tiers in one pytest run (unit, data-plane, end-to-end).
test: setup
	$(PYTEST) tests

test-unit: setup
	$(PYTEST) tests/unit

# The hostile tier alone (part of test-unit and test): hostile frames, files, clients, disks.
test-hostile: setup
	$(PYTEST) tests/unit/hostile

test-dataplane: setup
	$(PYTEST) tests/dataplane

test-e2e: setup
	$(PYTEST) tests/e2e

# The Tofino tier: bf-p4c compiles p4src/tna/ice.p4 for Tofino 1 and 2 (skips without bf-p4c).
test-tofino: setup
	$(PYTEST) tests/tofino

demo: setup
	$(PY) -m icefabric.experiment.demo

# QUICK=1 leaves out the simulator's 16,384-GPU runs (over 10 CPU minutes of the total)
bench: setup
	$(PY) -m icefabric.bench $(if $(QUICK),--quick)

# Compile p4src/ with real p4c when it is installed (target/bmv2.py: the build cache shared with
# --target bmv2 and ICE_TARGET=bmv2, copied to build/); the embedded target needs no compile step.
p4: setup
	$(PY) -m icefabric.target.bmv2 build p4src/ice.p4 --out $(BUILD) --if-available

# Check the Tofino program (p4src/tna/ice.p4) for Tofino 1 and 2 with p4test and the TNA headers
# in $(ICE_TNA_INCLUDE), then compile it with bf-p4c (the Tofino back end: fits it into the chip)
# into build/tna/tofino and build/tna/tofino2 when bf-p4c is on PATH and print the stages, PHV,
# SRAM and TCAM it used (icefabric.p4src.tofino_resources).  p4test's
# uninitialized_out_param warning is off: the TNA parsers leave metadata unset on purpose (the
# checksum verdict is written once, later; other fields are written before they are read), and
# bf-p4c's own uninitialized-read check, which knows Tofino, runs in the compile.
P4TEST ?= p4test
BF_P4C ?= bf-p4c
# --verbose 1: bf-p4c writes its resource logs (pipe/logs/resources.json, metrics.json) only
# when asked for logs.  TNA_CHIPS: the chips to compile (target:arch).
BF_P4C_FLAGS ?= --std p4-16 --p4runtime-force-std-externs --verbose 1
# Tofino 2 only: bf-p4c 34b86e9's dark-container allocation leaves the assembler a reference to an
# always-run table it removed ("No table named ara_table_63"); without it the program still fits
# (p4src/README.md, Tofino).
BF_P4C_TOFINO2_FLAGS ?= -Xp4c=--disable-dark-allocation
TNA_CHIPS ?= tofino:tna tofino2:t2na
p4-tna: setup
	@if command -v $(P4TEST) >/dev/null 2>&1 && [ -n "$(ICE_TNA_INCLUDE)" ]; then \
		for t in 1 2; do \
			echo "p4test -D__TARGET_TOFINO__=$$t p4src/tna/ice.p4"; \
			$(P4TEST) --std p4-16 --Wdisable=uninitialized_out_param -D__TARGET_TOFINO__=$$t \
				-I $(ICE_TNA_INCLUDE) p4src/tna/ice.p4 || exit 1; \
		done; \
	else \
		echo "p4-tna: $(P4TEST) not on PATH or ICE_TNA_INCLUDE unset; skipping the p4test check"; \
	fi
	@if command -v $(BF_P4C) >/dev/null 2>&1; then \
		outs=""; \
		for chip in $(TNA_CHIPS); do \
			target=$${chip%%:*}; arch=$${chip##*:}; out=$(BUILD)/tna/$$target; \
			extra=""; [ "$$target" = tofino2 ] && extra="$(BF_P4C_TOFINO2_FLAGS)"; \
			echo "$(BF_P4C) $$extra --target $$target --arch $$arch -o $$out p4src/tna/ice.p4"; \
			rm -rf $$out && mkdir -p $$out && \
			$(BF_P4C) $(BF_P4C_FLAGS) $$extra --target $$target --arch $$arch -o $$out \
				--p4runtime-files $$out/p4info.txt p4src/tna/ice.p4 || exit 1; \
			outs="$$outs $$out"; \
		done; \
		$(PY) -m icefabric.p4src.tofino_resources $$outs; \
	else \
		echo "p4-tna: $(BF_P4C) not on PATH; skipping the Tofino compile"; \
	fi

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	scripts/typecheck.sh
	$(PY) -m icefabric.p4src.generate --check

# After changing p4src/: rewrite p4src/ice_p4.py (names, constants, header layouts of ice.p4).
p4-py: setup
	$(PY) -m icefabric.p4src.generate

clean:
	rm -rf $(BUILD) .pytest_cache .mypy_cache .ruff_cache
	find . -name __pycache__ -type d -not -path "./$(VENV)/*" -prune -exec rm -rf {} +

# xtalk: `make demo` sets everything up and runs the quickstart; `make test` runs every test.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
AGENT   := agent/target/release/xtalk-agent
AGENT_SRC := agent/Cargo.toml $(shell find agent/src -name '*.rs' 2>/dev/null)

.PHONY: all setup catalog docs demo test test-agent test-py test-pure test-hostile bench clean

all: demo

$(AGENT): $(AGENT_SRC)
	cargo build --release --manifest-path agent/Cargo.toml

# The agent's catalog, checked in so that a host without a local agent validates too
# (src/xtalk/catalog.py; tests/test_catalog.py keeps it current).
CATALOG := src/xtalk/schema/catalog.json
$(CATALOG): $(AGENT)
	$(AGENT) catalog --json > $@.tmp && mv $@.tmp $@

catalog: $(CATALOG)

# docs/enemies.md's parameter tables, made from the catalog.
docs: $(CATALOG) $(BIN)/.installed
	$(BIN)/python -m xtalk.catalog --docs docs/enemies.md

$(BIN)/.installed: pyproject.toml $(AGENT)
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

# C artefacts: the probe example and the syscall-probe preload library.
build/probe_demo: examples/probes/probe_demo.c include/xtalk/probe.h
	@mkdir -p build
	cc -O2 -Wall -Wextra -pthread -Iinclude $< -o $@

build/libxtalk_preload.so: preload/xtalk_preload.c include/xtalk/probe.h
	@mkdir -p build
	cc -O2 -Wall -shared -fPIC -Iinclude $< -o $@ -ldl

NATIVE := build/probe_demo build/libxtalk_preload.so

setup: $(AGENT) $(CATALOG) $(BIN)/.installed $(NATIVE)

demo: setup
	$(BIN)/xtalk run examples/quickstart.toml

test-agent: $(AGENT)
	cargo test --release --manifest-path agent/Cargo.toml

test-py: setup
	@bash tests/peers.sh
	$(BIN)/python -m pytest -q -rs --durations=25

test: test-agent test-py

# The tests that start no agent: seconds, no root needed.
test-pure: setup
	$(BIN)/python -m pytest -q -rs -m "not agent"

# The `hostile` subset again with only cgroup2 mounted, then from a cgroup with no RT runtime
# (root; each script cleans up after itself).
test-hostile: setup
	@bash tests/peers.sh
	tests/hostile/cgroup2_only.sh
	tests/hostile/no_rt.sh

bench: setup
	@for f in bench/[!_]*.py; do echo "== $$f"; PYTHONPATH=src $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) agent/target build *.egg-info src/*.egg-info

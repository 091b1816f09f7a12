# xtalk: `make demo` sets everything up and runs the quickstart; `make test` runs every test but
# the few marked `slow`, which `make test-slow` runs (.ci/run runs both).
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
AGENT   := agent/target/release/xtalk-agent
AGENT_SRC := agent/Cargo.toml $(shell find agent/src -name '*.rs' 2>/dev/null)

.PHONY: all setup catalog docs demo evidence test test-agent test-py test-slow test-pure test-hostile bench clean agent-aarch64 test-agent-aarch64 arm-tools test-arm board board-test board-up board-down guest guest-test guest-up guest-down lab-test

all: demo

$(AGENT): $(AGENT_SRC)
	cargo build --release --manifest-path agent/Cargo.toml

# The interference explorer's native core (xtalk.model.native); without it the Python explorer runs.
EXPLORE := explorer/target/release/xtalk-explore
$(EXPLORE): explorer/Cargo.toml $(shell find explorer/src -name '*.rs' 2>/dev/null)
	cargo build --release --manifest-path explorer/Cargo.toml

# The agent's catalog, checked in so that a host without a local agent validates too
# (src/xtalk/catalog.py; tests/test_catalog.py keeps it current).
CATALOG := src/xtalk/schema/catalog.json
$(CATALOG): $(AGENT)
	$(AGENT) catalog --json > $@.tmp && mv $@.tmp $@

catalog: $(CATALOG)

# docs/enemies.md's parameter tables, made from the catalog.
docs: $(CATALOG) $(BIN)/.installed
	$(BIN)/python -m xtalk.catalog --docs docs/enemies.md

# setup.py compiles the preload library and xtalk.probe's module (from probe.h) into the package.
$(BIN)/.installed: pyproject.toml setup.py include/xtalk/probe.h preload/xtalk_preload.c bindings/python/xtalk_probe_module.c $(AGENT)
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

# C artefacts: the probe example and the syscall-probe preload library.
build/probe_demo: examples/probes/probe_demo.c include/xtalk/probe.h
	@mkdir -p build
	cc -O2 -Wall -Wextra -pthread -Iinclude $< -o $@

build/probe_logger: examples/probes/probe_logger.c include/xtalk/probe.h
	@mkdir -p build
	cc -O2 -Wall -Wextra -Iinclude $< -o $@

# The periodic program of docs/your-application.md, instrumented and (XTALK_NO_PROBES) not.
build/periodic: examples/apps/periodic.c include/xtalk/probe.h
	@mkdir -p build
	cc -O2 -Wall -Wextra -Iinclude $< -o $@

build/periodic-plain: examples/apps/periodic.c
	@mkdir -p build
	cc -O2 -Wall -Wextra -DXTALK_NO_PROBES $< -o $@

build/libxtalk_preload.so: preload/xtalk_preload.c include/xtalk/probe.h
	@mkdir -p build
	cc -O2 -Wall -shared -fPIC -Iinclude $< -o $@ -ldl

NATIVE := build/probe_demo build/probe_logger build/libxtalk_preload.so build/periodic build/periodic-plain

setup: $(AGENT) $(EXPLORE) $(CATALOG) $(BIN)/.installed $(NATIVE)

demo: setup
	$(BIN)/xtalk run examples/quickstart.toml

# The evidence example (examples/evidence/): two short experiments bundled into
# results/evidence-example-<date>/ (their results beside it, in ...-runs/).
evidence: setup
	XTALK=$(BIN)/xtalk examples/evidence/run.sh

test-agent: $(AGENT)
	cargo test --release --manifest-path agent/Cargo.toml
	cargo test --release --manifest-path bindings/rust/xtalk-probe/Cargo.toml

# Every pytest test but those marked `slow` (the longest, over about 10 s each on 2 CPUs):
# `make test` stays near 15 minutes there. The tests that start no agent run first, on every
# CPU (pytest-xdist, a module's tests on one worker, so its module-scoped fixtures are made
# once); then the `agent` tests, one at a time: they take the machine-wide lock and measure
# timing, which a test beside them would disturb. Both sessions run whatever the first says.
TEST_WORKERS ?= auto
test-py: setup
	@bash tests/peers.sh
	rc=0; $(BIN)/python -m pytest -q -rs --durations=25 -m "not slow and not agent" -n $(TEST_WORKERS) --dist loadscope || rc=$$?; \
	$(BIN)/python -m pytest -q -rs --durations=25 -m "not slow and agent" || rc=$$?; exit $$rc

test: test-agent test-py

# The labgrid lab on loopback (docs/lab.md): a coordinator, an exporter, places, campaigns
# over them with a kernel axis. tests/test_lab.py: "boards" that are this machine behind an
# sshd of their own (about 2 min on 2 CPUs); tests/test_lab_qemu.py: the emulated board of
# `make board` as labgrid places powered by labgrid's QEMUDriver, two of them and a broken one,
# both kernels (minutes of TCG; skipped, saying so, without `make board`); tests/test_lab_guest.py:
# the x86 guest of `make guest` as a place, both its kernels (skipped without `make guest`).
# With the board's image in place, the aarch64 agent it ships to the boards is built first.
lab-test: setup
	@if [ -s "$${XTALK_BOARD_DIR:-build/board}/rootfs.img" ]; then $(MAKE) --no-print-directory agent-aarch64; fi
	$(BIN)/python -m pytest -q -rs tests/test_lab.py tests/test_lab_qemu.py tests/test_lab_guest.py

# The tests marked `slow`, left out of `make test`; .ci/run runs them as a step of their own.
test-slow: setup
	@bash tests/peers.sh
	$(BIN)/python -m pytest -q -rs --durations=25 -m slow

# The tests that start no agent: seconds, no root needed.
test-pure: setup
	$(BIN)/python -m pytest -q -rs -m "not agent" -n $(TEST_WORKERS) --dist loadscope

# The `hostile` subset again with only cgroup2 mounted, then from a cgroup with no RT runtime
# (root; each script cleans up after itself).
test-hostile: setup
	@bash tests/peers.sh
	tests/hostile/cgroup2_only.sh
	tests/hostile/no_rt.sh

# The agent on Arm: a static aarch64 agent (musl, linked by the toolchain's rust-lld: no cross
# C compiler), its unit tests under qemu-user, and a 20-job run of it under qemu-user read back
# by the host (tests/arm/qemu_user.sh). `make arm-tools` installs the Rust target and
# qemu-user-static once; docs/board.md.
ARM_TARGET := aarch64-unknown-linux-musl
ARM_AGENT  := agent/target/$(ARM_TARGET)/release/xtalk-agent
ARM_CARGO  := CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=rust-lld CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_RUNNER=qemu-aarch64-static cargo
ARM_READY  = @rustup target list --installed 2>/dev/null | grep -qx $(ARM_TARGET) || { echo "make: the Rust target $(ARM_TARGET) is not installed: run 'make arm-tools' (rustup target add $(ARM_TARGET))" >&2; exit 2; }

$(ARM_AGENT): $(AGENT_SRC)
	$(ARM_READY)
	$(ARM_CARGO) build --release --manifest-path agent/Cargo.toml --target $(ARM_TARGET)

agent-aarch64: $(ARM_AGENT)

# Builds the agent too (integration tests run it), with the dev-dependencies' features: in a
# clean checkout run it before agent-aarch64, which then has nothing left to do. Output shown:
# the tests that cannot run under qemu-user say why they skipped.
test-agent-aarch64:
	$(ARM_READY)
	@command -v qemu-aarch64-static >/dev/null || { echo "make: qemu-aarch64-static is missing: run 'make arm-tools' (apt-get install qemu-user-static)" >&2; exit 2; }
	XTALK_AGENT_RUNNER=qemu-aarch64-static $(ARM_CARGO) test --release --manifest-path agent/Cargo.toml --target $(ARM_TARGET) -- --show-output

arm-tools:
	tests/arm/tools.sh

test-arm: setup
	tests/arm/qemu_user.sh

# The board in a box (docs/board.md): a Debian arm64 image booted by qemu-system-aarch64
# (TCG, Cortex-A53 × 4), driven through the SSH target. Not part of `make test` (too slow).
# `make board` installs the tools it needs (root) and builds the image once (cached in
# build/board, XTALK_BOARD_DIR); `make board-test` boots it (BOARD_KERNEL=stock|rt), runs
# sysinfo, the quickstart and a campaign there, checks them, and shuts the board down.
BOARD_KERNEL ?= stock
board:
	board/tools.sh
	board/build-image.sh

board-test: setup agent-aarch64
	board/test.sh $(BOARD_KERNEL)

board-up:
	board/board.sh up $(BOARD_KERNEL)

board-down:
	board/board.sh down

# The x86 guest (docs/board.md, seed 001 ch. 3): a Debian amd64 image with the stock and PREEMPT_RT
# kernels, booted by qemu-system-x86_64 (KVM where /dev/kvm is hardware KVM, TCG otherwise).
# `make guest` installs what is missing (root) and builds the image once (cached beside the
# board's, XTALK_BOARD_DIR); `make guest-test` runs examples/latency_guest.toml natively, in
# the guest and in the guest under a SCHED_DEADLINE reservation, compares the three, checks,
# and shuts the guest down. Not part of `make test` (minutes).
guest:
	board/tools.sh --guest
	board/build-image.sh --guest

guest-test: setup
	board/guest-test.sh

guest-up:
	board/guest.sh up

guest-down:
	board/guest.sh down

bench: setup
	@for f in bench/[!_]*.py; do echo "== $$f"; PYTHONPATH=src $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) agent/target explorer/target build *.egg-info src/*.egg-info src/xtalk/_data src/xtalk/_probe*.so bindings/rust/xtalk-probe/target

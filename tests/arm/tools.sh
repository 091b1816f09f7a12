#!/usr/bin/env bash
# What the aarch64 agent needs on an x86_64 build machine, installed if missing (idempotent):
# the Rust target aarch64-unknown-linux-musl (rustup) and qemu-aarch64-static (Debian's
# qemu-user-static, through apt). The static musl agent links with the toolchain's own
# rust-lld, so no cross C compiler is needed. Exit 2, naming what is missing and how to get
# it, where nothing can be installed.
set -euo pipefail
TARGET=aarch64-unknown-linux-musl

if ! rustup target list --installed 2>/dev/null | grep -qx "$TARGET"; then
  command -v rustup >/dev/null || { echo "tools.sh: the Rust target $TARGET is missing and there is no rustup to add it; install rustup (https://rustup.rs)" >&2; exit 2; }
  echo "tools.sh: adding the Rust target $TARGET (rustup, once)"
  rustup target add "$TARGET" || { echo "tools.sh: 'rustup target add $TARGET' failed (offline?); run it by hand" >&2; exit 2; }
fi

if ! command -v qemu-aarch64-static >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "tools.sh: installing qemu-user-static (apt, once)"
    { DEBIAN_FRONTEND=noninteractive apt-get install -y -q qemu-user-static >/dev/null ||
      { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q qemu-user-static >/dev/null; }; } ||
      { echo "tools.sh: apt-get install qemu-user-static failed (offline?); install it by hand" >&2; exit 2; }
  else
    echo "tools.sh: qemu-aarch64-static is missing: install qemu-user-static (apt-get install qemu-user-static, as root)" >&2
    exit 2
  fi
fi

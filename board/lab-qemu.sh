#!/bin/sh
# qemu-system-aarch64 for labgrid's QEMUDriver (the `tools:` entry of an emulated lab's
# environment file, docs/lab.md): the same binary at nice 19, as board/board.sh starts it,
# because the machine is shared and TCG takes every core it is given.
# XTALK_LAB_QEMU names another binary.
exec nice -n 19 "${XTALK_LAB_QEMU:-qemu-system-aarch64}" "$@"

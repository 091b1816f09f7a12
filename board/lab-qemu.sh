#!/bin/sh
# qemu-system-aarch64 for labgrid's QEMUDriver (the `tools:` entry of an emulated lab's
# environment file, docs/lab.md): the same binary niced, as board/board.sh starts it, because
# the machine is shared and TCG takes every core it is given; and killed with the process that
# started it (labgrid's thread in the campaign host), so a host killed leaves no board behind
# holding its SSH port. XTALK_LAB_NICE: the niceness (default 19); XTALK_LAB_QEMU: another binary.
exec setpriv --pdeathsig KILL nice -n "${XTALK_LAB_NICE:-19}" "${XTALK_LAB_QEMU:-qemu-system-aarch64}" "$@"

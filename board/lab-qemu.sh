#!/bin/sh
# The qemu of an emulated machine for labgrid's QEMUDriver (the `tools:` entry of an emulated
# lab's environment file, docs/lab.md): the same binary niced, as board/board.sh and
# board/guest.sh start it, because the machine is shared and TCG takes every core it is given;
# and killed with the process that started it (labgrid's thread in the campaign host), so a
# host killed leaves no machine behind holding its SSH port. The architecture is the script's
# name's: lab-qemu.sh runs qemu-system-aarch64 (the board), lab-qemu-x86_64.sh (a link to it)
# qemu-system-x86_64 (the guest). XTALK_LAB_NICE: the niceness (default 19); XTALK_LAB_QEMU:
# another binary.
case ${0##*/} in
    lab-qemu-*.sh) arch=${0##*/lab-qemu-}; arch=${arch%.sh} ;;
    *) arch=aarch64 ;;
esac
exec setpriv --pdeathsig KILL nice -n "${XTALK_LAB_NICE:-19}" "${XTALK_LAB_QEMU:-qemu-system-$arch}" "$@"

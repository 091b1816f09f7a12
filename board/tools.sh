#!/bin/sh
# The Debian tools the board needs, installed when missing (root, apt-get), named otherwise:
# qemu-system-aarch64 (qemu-system-arm), qemu-aarch64-static (qemu-user-static), mmdebstrap
# and arch-test (the arm64 root), mkfs.ext4 (e2fsprogs), dtc and fdtput (device-tree-compiler: the
# board's device tree), ssh and ssh-keygen (openssh-client). With --guest, what the x86 guest
# needs instead (board/guest.sh): qemu-system-x86_64 (qemu-system-x86), mmdebstrap, mkfs.ext4,
# ssh, ssh-keygen.
#   board/tools.sh [--guest] [--dry-run]    --dry-run: print the apt-get command, install nothing
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
pairs="qemu-system-aarch64:qemu-system-arm qemu-aarch64-static:qemu-user-static mmdebstrap:mmdebstrap
       arch-test:arch-test mkfs.ext4:e2fsprogs dtc:device-tree-compiler fdtput:device-tree-compiler ssh:openssh-client ssh-keygen:openssh-client"
if [ "${1:-}" = --guest ]; then
    shift
    pairs="qemu-system-x86_64:qemu-system-x86 mmdebstrap:mmdebstrap mkfs.ext4:e2fsprogs ssh:openssh-client ssh-keygen:openssh-client"
fi
missing=""
for pair in $pairs; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || case " $missing " in *" ${pair#*:} "*) ;; *) missing="$missing ${pair#*:}" ;; esac
done
[ -n "$missing" ] || { say "tools in place ($(for p in $pairs; do printf '%s ' "${p%%:*}"; done | sed 's/ $//; s/ /, /g'))"; exit 0; }
cmd="apt-get install -y --no-install-recommends$missing"
[ "${1:-}" = --dry-run ] && { echo "$cmd"; exit 0; }
[ "$(id -u)" = 0 ] || die "missing:$missing; install them as root: $cmd"
say "installing what is missing:$missing"
# nice: the machine is shared. apt-get update only when the package lists do not know them.
apt-cache show $missing >/dev/null 2>&1 || nice -n 19 apt-get update -q
DEBIAN_FRONTEND=noninteractive nice -n 19 $cmd >&2
say "installed:$missing"

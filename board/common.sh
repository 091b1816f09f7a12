# Shared by the board scripts (sourced): messages, the cache directory, the mirror, binfmt_misc.

say() { echo "board: $*" >&2; }
die() { echo "board: $*" >&2; exit 2; }
step() { echo "board: [$(date -u +%H:%M:%S)] $*" >&2; }

# The cache directory (outside git): the argument, else $XTALK_BOARD_DIR, else build/board.
board_dir() {
    d=${1:-${XTALK_BOARD_DIR:-build/board}}
    mkdir -p "$d" && cd "$d" && pwd
}

# A TCP port free on the loopback now (for qemu's SSH forward).
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# The Debian mirror this machine's apt uses (its first URIs:/deb line), else deb.debian.org.
board_mirror() {
    m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's/^URIs: *\([^ ]*debian\)\/*$/\1/p' | head -1)
    [ -n "$m" ] || m=$(sed -n 's/^deb \(\[[^]]*\] \)*\(http[^ ]*debian\)\/* .*/\2/p' /etc/apt/sources.list 2>/dev/null | head -1)
    echo "${m:-http://deb.debian.org/debian}"
}

# aarch64 binaries run through qemu-aarch64-static while the image is built (chroot). The
# entry (and the binfmt_misc mount) are removed again if this script added them.
BINFMT=/proc/sys/fs/binfmt_misc
binfmt_on() {
    binfmt_mounted=0 binfmt_added=0
    if [ ! -e "$BINFMT/register" ]; then
        mount -t binfmt_misc binfmt_misc "$BINFMT" || die "cannot mount binfmt_misc (needed to configure arm64 packages)"
        binfmt_mounted=1
    fi
    if [ ! -e "$BINFMT/qemu-aarch64" ]; then
        printf '%s' ':qemu-aarch64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:/usr/bin/qemu-aarch64-static:F' > "$BINFMT/register"
        binfmt_added=1
        say "binfmt_misc: qemu-aarch64 registered (removed again at the end)"
    fi
}
binfmt_off() {
    [ "${binfmt_added:-0}" = 1 ] && echo -1 > "$BINFMT/qemu-aarch64" && say "binfmt_misc: qemu-aarch64 removed"
    [ "${binfmt_mounted:-0}" = 1 ] && umount "$BINFMT"
    binfmt_added=0 binfmt_mounted=0
}

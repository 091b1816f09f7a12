# Shared by the board scripts (sourced): messages, the cache directory, the mirror, binfmt_misc.

say() { echo "board: $*" >&2; }
die() { echo "board: $*" >&2; exit 2; }
step() { echo "board: [$(date -u +%H:%M:%S)] $*" >&2; }

# The cache directory (outside git): the argument, else $XTALK_BOARD_DIR, else build/board.
# Root's only (0700), and so is every file in it (0600): the images hold the machines' SSH
# host private keys and root's authorized key, id_ed25519 is root's client key into them.
# Files an earlier version left readable are closed here too, on every call.
board_dir() {
    d=${1:-${XTALK_BOARD_DIR:-build/board}}
    (umask 077 && mkdir -p "$d") && chmod 700 "$d" && private_files "$d" && cd "$d" && pwd
}

# Every plain file directly in DIR readable and writable by its owner only.
private_files() { find "$1" -maxdepth 1 -type f ! -perm 600 -exec chmod 600 {} +; }

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

# Wait until the machine qemu boots answers over SSH ($1: the script's ssh function), the
# console's last line shown every $2 s; qemu gone, or no SSH after BOOT_TIMEOUT s, stops
# there (the caller's `pid`, `down`, $run and $BOOT_TIMEOUT). Leaves $start set.
wait_ssh() { # SSH_FUNCTION INTERVAL
    start=$(date +%s)
    while ! "$1" true 2>/dev/null; do
        pid >/dev/null || die "qemu stopped while booting; the console's end: $(tail -3 "$run/console.log" | tr -d '\r')"
        [ $(( $(date +%s) - start )) -lt "$BOOT_TIMEOUT" ] || { down; die "no SSH after ${BOOT_TIMEOUT} s; see $run/console.log"; }
        say "  $(( $(date +%s) - start )) s: $(grep -a . "$run/console.log" | tail -1 | tr -d '\r' | cut -c1-100)"
        sleep "$2"
    done
}

# Power the machine off over SSH ($2: the script's ssh function) and stop its qemu if it is
# still there after $3 s; $1 names it in the messages. Nothing up: says so.
power_off() { # NAME SSH_FUNCTION TIMEOUT
    p=$(pid) || { say "no $1 up"; rm -f "$run/qemu.pid"; return 0; }
    "$2" poweroff >/dev/null 2>&1 || true
    i=0
    while kill -0 "$p" 2>/dev/null && [ $i -lt "$3" ]; do sleep 1; i=$((i + 1)); done
    if kill -0 "$p" 2>/dev/null; then
        say "no power-off after $3 s: stopping qemu $p"
        kill "$p"; sleep 2
    fi
    rm -f "$run/qemu.pid"
    say "$1 down (after ${i} s)"
}

# SSH to the machine qemu booted, as root, with the cache's key and the run's known_hosts
# (the caller's $cache and $run).
machine_ssh() {
    ssh -p "$(cat "$run/port")" -i "$cache/id_ed25519" -o BatchMode=yes -o ConnectTimeout=10 \
        -o StrictHostKeyChecking=yes -o UserKnownHostsFile="$run/known_hosts" -o LogLevel=ERROR root@127.0.0.1 "$@"
}

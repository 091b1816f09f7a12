#!/bin/sh
# The board: the image from build-image.sh booted by qemu-system-aarch64 (TCG: `-M virt -cpu
# cortex-a53,pmu=on -smp 4`), its SSH forwarded to 127.0.0.1:PORT.
#
#   board/board.sh up [stock|rt]   boot (or reuse a board already up with that kernel); waits for SSH
#   board/board.sh down            power off (SSH), then stop qemu if it has not gone
#   board/board.sh url             the --target URL of the board that is up
#   board/board.sh ssh CMD...      run CMD on the board as root
#   board/board.sh status          say what is up
#   board/board.sh command [stock|rt] [PORT]   print the qemu command line (starts nothing)
#
# Files in CACHE (XTALK_BOARD_DIR, default build/board): run/qemu.pid, run/port, run/kernel,
# run/console.log (the serial console), run/known_hosts. Writes go to a qemu snapshot
# (-snapshot): the cached image is never changed, each boot starts from the built image.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
cache=$(board_dir)
run="$cache/run"
BOOT_TIMEOUT=${XTALK_BOARD_BOOT_TIMEOUT:-900}

pid() { [ -s "$run/qemu.pid" ] && p=$(cat "$run/qemu.pid") && grep -qa qemu-system-aarch64 "/proc/$p/cmdline" 2>/dev/null && echo "$p"; }

kernel_arg() {
    case ${1:-stock} in stock|rt) echo "${1:-stock}" ;; *) die "kernel '$1': write stock or rt" ;; esac
}

CPUS="-cpu cortex-a53,pmu=on -smp 4 -m ${XTALK_BOARD_MEMORY:-1024}"

# The board's device tree: qemu's own for this machine (dumpdtb), with the caches of a quad
# Cortex-A53 added (32 KiB L1 I and D per core, 512 KiB L2 shared by the four, 64-byte lines).
# qemu's virt tree describes none, and arm64 Linux takes cache sizes from the firmware only,
# so without them the board has no LLC (sizes such as "llc/4" or "l2" resolve to nothing).
# TCG emulates no cache: this only describes them, timings are unaffected.
make_dtb() { # OUT
    rm -f "$1" "$1.tmp"
    qemu-system-aarch64 -M virt,dumpdtb="$1.tmp" $CPUS -display none -nic none >/dev/null 2>&1 ||
        die "qemu-system-aarch64 could not dump the virt machine's device tree"
    ph=$(( $(dtc -q -I dtb -O dts "$1.tmp" | sed -n 's/.*phandle = <\(0x[0-9a-f]*\)>.*/\1/p' | sort -u | tail -1) + 1 ))
    fdtput -c "$1.tmp" /cpus/l2-cache
    fdtput -t s "$1.tmp" /cpus/l2-cache compatible cache
    fdtput -t s "$1.tmp" /cpus/l2-cache cache-unified ""
    fdtput -t u "$1.tmp" /cpus/l2-cache cache-level 2
    fdtput -t u "$1.tmp" /cpus/l2-cache cache-size 524288
    fdtput -t u "$1.tmp" /cpus/l2-cache cache-line-size 64
    fdtput -t u "$1.tmp" /cpus/l2-cache cache-sets 512
    fdtput -t u "$1.tmp" /cpus/l2-cache phandle "$ph"
    for c in 0 1 2 3; do
        n=/cpus/cpu@$c
        fdtput -t u "$1.tmp" $n d-cache-size 32768; fdtput -t u "$1.tmp" $n d-cache-line-size 64; fdtput -t u "$1.tmp" $n d-cache-sets 128
        fdtput -t u "$1.tmp" $n i-cache-size 32768; fdtput -t u "$1.tmp" $n i-cache-line-size 64; fdtput -t u "$1.tmp" $n i-cache-sets 256
        fdtput -t u "$1.tmp" $n next-level-cache "$ph"
    done
    mv "$1.tmp" "$1"
}

qemu_command() { # KERNEL PORT
    echo qemu-system-aarch64 -M virt $CPUS \
        -accel tcg,thread=multi -display none -monitor none -serial "file:$run/console.log" \
        -kernel "$cache/vmlinuz-$1" -initrd "$cache/initrd-$1" -dtb "$run/board.dtb" \
        -append "'root=/dev/vda rootfstype=ext4 rw console=ttyAMA0 net.ifnames=0 systemd.unified_cgroup_hierarchy=1'" \
        -drive "file=$cache/rootfs.img,format=raw,if=none,id=disk,snapshot=on" -device virtio-blk-device,drive=disk \
        -netdev "user,id=net,hostfwd=tcp:127.0.0.1:$2-:22" -device virtio-net-device,netdev=net \
        -device virtio-rng-device -daemonize -pidfile "$run/qemu.pid"
}

up() {
    k=$(kernel_arg "${1:-stock}")
    [ -s "$cache/rootfs.img" ] && [ -s "$cache/vmlinuz-$k" ] || die "no board image in $cache: run 'make board' first"
    if p=$(pid); then
        [ "$(cat "$run/kernel")" = "$k" ] && { say "board already up (qemu $p, kernel $k, port $(cat "$run/port"))"; return 0; }
        say "board up with the $(cat "$run/kernel") kernel: shutting it down to boot $k"
        down
    fi
    command -v qemu-system-aarch64 >/dev/null || die "qemu-system-aarch64 is missing: run 'make board' as root (apt-get install qemu-system-arm)"
    mkdir -p "$run"
    port=${XTALK_BOARD_PORT:-$(free_port)}
    echo "$port" > "$run/port"; echo "$k" > "$run/kernel"
    echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$cache/host_key.pub")" > "$run/known_hosts"
    : > "$run/console.log"
    command -v fdtput >/dev/null || die "fdtput is missing: run 'make board' as root (apt-get install device-tree-compiler)"
    make_dtb "$run/board.dtb"
    step "booting the board ($k kernel $(cat "$cache/version-$k"), SSH on 127.0.0.1:$port, console in $run/console.log)"
    # nice: the machine is shared, and TCG would take every core it is given.
    eval "nice -n 19 $(qemu_command "$k" "$port")"
    wait_ssh machine_ssh 10
    say "board up after $(( $(date +%s) - start )) s: $(machine_ssh uname -srm)"
}

down() {
    power_off board machine_ssh 90
}

case ${1:-} in
    up) up "${2:-stock}" ;;
    down) down ;;
    url) pid >/dev/null || die "no board up: board/board.sh up"
         echo "ssh://root@127.0.0.1:$(cat "$run/port")?identity=$cache/id_ed25519&known_hosts=$run/known_hosts&name=board-$(cat "$run/kernel")" ;;
    ssh) shift; pid >/dev/null || die "no board up: board/board.sh up"; machine_ssh "$@" ;;
    status) if p=$(pid); then say "up: qemu $p, kernel $(cat "$run/kernel"), port $(cat "$run/port")"; else say "down"; fi ;;
    command) k=$(kernel_arg "${2:-stock}"); mkdir -p "$run"; make_dtb "$run/board.dtb"; qemu_command "$k" "${3:-2222}" ;;
    *) die "usage: board/board.sh up [stock|rt] | down | url | ssh CMD | status | command [stock|rt] [PORT]" ;;
esac

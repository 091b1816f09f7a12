#!/bin/sh
# The x86 guest (seed 001 ch. 3): the amd64 image from `build-image.sh --guest` (Debian
# PREEMPT_RT kernel) booted by qemu-system-x86_64 under KVM with the host's CPU model when
# /dev/kvm opens and is hardware KVM, under TCG otherwise (said so, kept in run/accel, and
# named in the --target URL: guest-kvm or guest-tcg); SSH forwarded to
# 127.0.0.1:PORT; a QMP socket to read the vCPU threads' ids (board/guest.sh vcpus).
#
#   board/guest.sh up              boot (or reuse the guest already up); waits for SSH
#   board/guest.sh down            power off (SSH), then stop qemu if it has not gone
#   board/guest.sh url             the --target URL of the guest
#   board/guest.sh ssh CMD...      run CMD in the guest as root
#   board/guest.sh status          say what is up (and the accelerator)
#   board/guest.sh vcpus           the vCPU thread ids on this machine (QMP query-cpus-fast)
#   board/guest.sh command [kvm|tcg] [PORT]   print the qemu command line (starts nothing)
#
# Files in CACHE (XTALK_BOARD_DIR, default build/board): guest-run/qemu.pid, port, accel,
# console.log, known_hosts, qmp.sock. Writes go to a qemu snapshot: the image never changes.
# XTALK_PYTHON: the Python with xtalk's dependencies (default .venv/bin/python).
# XTALK_GUEST_CPUS (default 2: this machine has 2) and XTALK_GUEST_MEMORY (MiB, default 1024).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
cache=$(board_dir)
run="$cache/guest-run"
BOOT_TIMEOUT=${XTALK_GUEST_BOOT_TIMEOUT:-300}
SMP=${XTALK_GUEST_CPUS:-2}
MEM=${XTALK_GUEST_MEMORY:-1024}

pid() { [ -s "$run/qemu.pid" ] && p=$(cat "$run/qemu.pid") && grep -qa qemu-system-x86_64 "/proc/$p/cmdline" 2>/dev/null && echo "$p"; }

# kvm when /dev/kvm opens for reading and writing (what qemu needs) and is the hardware KVM
# (kvm_intel or kvm_amd), else tcg; XTALK_GUEST_ACCEL=kvm|tcg decides instead. Why not kvm
# goes to stderr. A /dev/kvm served by kvm_pvm alone (PVM: paravirtual nested KVM without
# VMX/SVM, as on this project's build machine) opens, but boots only kernels built as PVM
# guests: Debian's stops after "Probing EDD" with nothing more on the console.
accel_here() {
    case ${XTALK_GUEST_ACCEL:-} in kvm|tcg) echo "$XTALK_GUEST_ACCEL"; return ;; "") ;; *) die "XTALK_GUEST_ACCEL '$XTALK_GUEST_ACCEL': write kvm or tcg" ;; esac
    if ! ( : <> /dev/kvm ) 2>/dev/null; then
        say "/dev/kvm does not open here"; echo tcg
    elif [ ! -d /sys/module/kvm_intel ] && [ ! -d /sys/module/kvm_amd ] && [ -d /sys/module/kvm_pvm ]; then
        say "/dev/kvm here is KVM-PVM (kvm_pvm, no VMX/SVM): it boots PVM guest kernels only, not Debian's"; echo tcg
    else
        echo kvm
    fi
}

qemu_command() { # ACCEL PORT
    case $1 in
        # -arch-capabilities: under nested KVM (this machine is itself a KVM guest) qemu 7.2
        # cannot set that MSR (0x10a) and aborts at start; the guest then takes the CPU as it
        # is, minus that MSR's report of which speculation bugs it lacks.
        kvm) cpu="-accel kvm -cpu host,-arch-capabilities" ;;
        # TCG: qemu's own CPU model with its hypervisor leaf (the agent records "emulated").
        tcg) cpu="-accel tcg,thread=multi -cpu max" ;;
        *) die "accelerator '$1': write kvm or tcg" ;;
    esac
    echo qemu-system-x86_64 -M q35 $cpu -smp "$SMP" -m "$MEM" \
        -display none -monitor none -serial "file:$run/console.log" -qmp "unix:$run/qmp.sock,server=on,wait=off" \
        -kernel "$cache/guest-vmlinuz-rt" -initrd "$cache/guest-initrd-rt" \
        -append "'root=/dev/vda rootfstype=ext4 rw console=ttyS0 net.ifnames=0 systemd.unified_cgroup_hierarchy=1'" \
        -drive "file=$cache/guest-rootfs.img,format=raw,if=none,id=disk,snapshot=on" -device virtio-blk-pci,drive=disk \
        -netdev "user,id=net,hostfwd=tcp:127.0.0.1:$2-:22" -device virtio-net-pci,netdev=net \
        -device virtio-rng-pci -daemonize -pidfile "$run/qemu.pid"
}

up() {
    [ -s "$cache/guest-rootfs.img" ] && [ -s "$cache/guest-vmlinuz-rt" ] || die "no guest image in $cache: run 'make guest' first"
    if p=$(pid); then say "guest already up (qemu $p, $(cat "$run/accel"), port $(cat "$run/port"))"; return 0; fi
    command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 is missing: run 'make guest' as root (apt-get install qemu-system-x86)"
    mkdir -p "$run"
    port=${XTALK_GUEST_PORT:-$(free_port)}
    accel=$(accel_here)
    [ "$accel" = kvm ] || say "the guest runs under TCG: emulated, its timings are an emulator's, not a KVM guest's"
    echo "$port" > "$run/port"; echo "$accel" > "$run/accel"
    echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$cache/guest-host_key.pub")" > "$run/known_hosts"
    : > "$run/console.log"; rm -f "$run/qmp.sock"
    step "booting the guest ($accel, $SMP vCPUs, kernel $(cat "$cache/guest-version-rt"), SSH on 127.0.0.1:$port, console in $run/console.log)"
    # nice 10: the machine is shared (the other builds and tests keep the nicer share). The
    # vCPU threads then run at nice 10 unless a reservation (xtalk sched reserve) lifts them.
    eval "nice -n ${XTALK_GUEST_NICE:-10} $(qemu_command "$accel" "$port")"
    wait_ssh machine_ssh 3
    say "guest up after $(( $(date +%s) - start )) s ($accel): $(machine_ssh uname -srm)"
}

down() {
    power_off guest machine_ssh 60
    rm -f "$run/qmp.sock"
}

# xtalk's own QMP client (src/xtalk/sched/qmp.py), run from this checkout's sources.
vcpus() {
    pid >/dev/null || die "no guest up: board/guest.sh up"
    PYTHONPATH="$here/../src" "${XTALK_PYTHON:-$here/../.venv/bin/python}" -c \
        'import sys; from xtalk.sched.qmp import query_vcpu_threads; print(*query_vcpu_threads(sys.argv[1]))' "$run/qmp.sock"
}

case ${1:-} in
    up) up ;;
    down) down ;;
    url) pid >/dev/null || die "no guest up: board/guest.sh up"
         echo "ssh://root@127.0.0.1:$(cat "$run/port")?identity=$cache/id_ed25519&known_hosts=$run/known_hosts&name=guest-$(cat "$run/accel")" ;;
    ssh) shift; pid >/dev/null || die "no guest up: board/guest.sh up"; machine_ssh "$@" ;;
    status) if p=$(pid); then say "up: qemu $p, $(cat "$run/accel"), port $(cat "$run/port")"; else say "down"; fi ;;
    vcpus) vcpus ;;
    command) mkdir -p "$run"; qemu_command "${2:-$(accel_here)}" "${3:-2222}" ;;
    *) die "usage: board/guest.sh up | down | url | ssh CMD | status | vcpus | command [kvm|tcg] [PORT]" ;;
esac

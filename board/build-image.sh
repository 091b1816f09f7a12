#!/bin/sh
# Build the board's disk image once: a minimal Debian bookworm arm64 root (mmdebstrap; package
# maintainer scripts run under qemu-aarch64-static through binfmt_misc) with openssh-server,
# systemd (cgroup v2 only), the stock and the PREEMPT_RT kernels; then the kernels and initrds
# are copied out for qemu's direct kernel boot, and the root becomes an ext4 image.
#
#   board/build-image.sh [CACHE_DIR]     (default build/board; XTALK_BOARD_DIR overrides)
#
# The result is cached: CACHE/rootfs.img, CACHE/vmlinuz-{stock,rt}, CACHE/initrd-{stock,rt},
# CACHE/id_ed25519 (the client key), CACHE/host_key.pub (the board's host key, for
# known_hosts). A second call with everything in place does nothing. Runs as root.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
cache=$(board_dir "${1:-}")
mirror=${XTALK_BOARD_MIRROR:-$(board_mirror)}
suite=bookworm
packages="systemd-sysv,udev,dbus,openssh-server,iproute2,procps,kmod,initramfs-tools,zstd,linux-image-arm64,linux-image-rt-arm64"

if [ -s "$cache/rootfs.img" ] && [ -s "$cache/vmlinuz-stock" ] && [ -s "$cache/vmlinuz-rt" ] && [ -s "$cache/id_ed25519" ]; then
    say "image already built in $cache (remove it to build again)"
    exit 0
fi
[ "$(id -u)" = 0 ] || die "building the image needs root (mmdebstrap, chroot, binfmt_misc)"
for tool in mmdebstrap arch-test mkfs.ext4 ssh-keygen qemu-aarch64-static; do
    command -v "$tool" >/dev/null || die "$tool is missing: run 'make board' as root (it installs the tools)"
done
mkdir -p "$cache"
root="$cache/rootfs.tmp"
rm -rf "$root"
start=$(date +%s)

step "1/4 binfmt_misc entry for aarch64 (qemu-aarch64-static)"
binfmt_on
trap 'binfmt_off; rm -rf "$root"' EXIT INT TERM

step "2/4 mmdebstrap $suite arm64 from $mirror ($packages): a few minutes to download, longer to configure under emulation"
# nice: the machine is shared; --verbose shows apt's progress (each package as it unpacks and configures).
# Before the kernels install: their initrds hold the virtio and ext4 modules only
# (MODULES=list and board/initramfs-hook). With Debian's default (most), mkinitramfs spends
# minutes per kernel under qemu-user copying every driver module.
# force-unsafe-io: no fsync per file (dpkg runs under emulation; the root is rebuilt on failure);
# no docs or translations: less to unpack under emulation, nothing the board reads (manuals
# stay: bash's postinst names one in update-alternatives, which reports an error without it).
nice -n 19 mmdebstrap --verbose --mode=root --arch=arm64 --variant=minbase --include="$packages" \
    --dpkgopt=force-unsafe-io --aptopt='Acquire::Languages "none"' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --essential-hook='mkdir -p "$1/etc/initramfs-tools/conf.d" "$1/etc/initramfs-tools/hooks" && echo MODULES=list > "$1/etc/initramfs-tools/conf.d/board"' \
    --essential-hook="install -m 755 '$here/initramfs-hook' \"\$1/etc/initramfs-tools/hooks/board\"" \
    "$suite" "$root" "$mirror"
say "root filesystem done after $(( $(date +%s) - start )) s"

step "3/4 board settings: network, sshd, root's key, serial console, fstab"
echo xtalk-board > "$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 xtalk-board\n' > "$root/etc/hosts"
printf '/dev/vda / ext4 rw,noatime 0 0\n' > "$root/etc/fstab"
# any wired interface by DHCP (qemu's user network answers); networkd ships with systemd.
mkdir -p "$root/etc/systemd/network" "$root/etc/systemd/system/multi-user.target.wants"
printf '[Match]\nName=en* eth*\n\n[Network]\nDHCP=ipv4\n' > "$root/etc/systemd/network/80-board.network"
ln -sf /lib/systemd/system/systemd-networkd.service "$root/etc/systemd/system/multi-user.target.wants/systemd-networkd.service"
# root logs in with the board key only; no DNS lookups of the client (there is no DNS).
mkdir -p "$root/etc/ssh/sshd_config.d"
printf 'PermitRootLogin prohibit-password\nPasswordAuthentication no\nUseDNS no\n' > "$root/etc/ssh/sshd_config.d/xtalk-board.conf"
[ -s "$cache/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C xtalk-board -f "$cache/id_ed25519"
install -d -m 700 "$root/root/.ssh"
install -m 600 "$cache/id_ed25519.pub" "$root/root/.ssh/authorized_keys"
cp "$root/etc/ssh/ssh_host_ed25519_key.pub" "$cache/host_key.pub"
# the agent's runs stay in /run/xtalk (tmpfs); nothing else to install: the agent is static.
say "settings done"

step "4/4 kernels, initrds and the ext4 image"
for flavour in stock rt; do
    case $flavour in
        stock) k=$(ls "$root"/boot/vmlinuz-*-arm64 | grep -v -- '-rt-arm64$' | tail -1) ;;
        rt) k=$(ls "$root"/boot/vmlinuz-*-rt-arm64 | tail -1) ;;
    esac
    [ -n "$k" ] || die "no $flavour kernel in $root/boot"
    v=${k##*/vmlinuz-}
    cp "$k" "$cache/vmlinuz-$flavour"
    cp "$root/boot/initrd.img-$v" "$cache/initrd-$flavour"
    echo "$v" > "$cache/version-$flavour"
    say "$flavour kernel: $v"
done
size_mb=$(( $(du -sm "$root" | cut -f1) + 768 ))
rm -f "$cache/rootfs.img.tmp"
nice -n 19 mkfs.ext4 -q -L xtalk-board -d "$root" "$cache/rootfs.img.tmp" "${size_mb}M"
mv "$cache/rootfs.img.tmp" "$cache/rootfs.img"
say "image built in $(( $(date +%s) - start )) s: $cache/rootfs.img (${size_mb} MiB)"

#!/bin/sh
# Build a disk image once: a minimal Debian bookworm root (mmdebstrap) with openssh-server and
# systemd (cgroup v2 only), and its kernels; the kernels and initrds are copied out for qemu's
# direct kernel boot, and the root becomes an ext4 image. Two flavours:
#
#   board  the arm64 board: stock and PREEMPT_RT kernels; package maintainer scripts run under
#          qemu-aarch64-static through binfmt_misc (board/board.sh boots it)
#   guest  an amd64 KVM guest (seed 001 ch. 3): stock and PREEMPT_RT kernels, built natively
#          (board/guest.sh boots the RT one; its labgrid place either, docs/lab.md)
#
#   board/build-image.sh [--guest] [CACHE_DIR]     (default build/board; XTALK_BOARD_DIR overrides)
#
# The result is cached: CACHE/PREFIXrootfs.img, CACHE/PREFIXvmlinuz-K, CACHE/PREFIXinitrd-K,
# CACHE/PREFIXversion-K (K: stock, rt), CACHE/PREFIXhost_key.pub (the machine's host key, for
# known_hosts), PREFIX empty for the board and "guest-" for the guest; CACHE/id_ed25519 (the
# client key, shared by both). A second call with everything in place does nothing. Runs as root.
set -eu
# Everything made here is root's only: CACHE is 0700 and its files 0600 (common.sh
# board_dir, private_files); the root's own files keep their modes (the image's /etc/hosts
# and networkd's files are read by other users inside it).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
flavour=board
[ "${1:-}" = --guest ] && { flavour=guest; shift; }
cache=$(board_dir "${1:-}")
mirror=${XTALK_BOARD_MIRROR:-$(board_mirror)}
suite=bookworm
common_packages="systemd-sysv,udev,dbus,openssh-server,iproute2,procps,kmod,initramfs-tools,zstd"
case $flavour in
    board) prefix="" arch=arm64 kernels="stock rt" hostname=xtalk-board
           packages="$common_packages,linux-image-arm64,linux-image-rt-arm64"
           tools="mmdebstrap arch-test mkfs.ext4 ssh-keygen qemu-aarch64-static" ;;
    # util-linux (chrt, taskset) is essential and comes with minbase.
    guest) prefix="guest-" arch=amd64 kernels="stock rt" hostname=xtalk-guest
           packages="$common_packages,linux-image-amd64,linux-image-rt-amd64"
           tools="mmdebstrap mkfs.ext4 ssh-keygen" ;;
esac

built=1
for k in $kernels; do [ -s "$cache/${prefix}vmlinuz-$k" ] || built=0; done
if [ $built = 1 ] && [ -s "$cache/${prefix}rootfs.img" ] && [ -s "$cache/id_ed25519" ]; then
    say "$flavour image already built in $cache (remove ${prefix}rootfs.img to build again)"
    exit 0
fi
[ "$(id -u)" = 0 ] || die "building the image needs root (mmdebstrap, chroot, binfmt_misc)"
for tool in $tools; do
    command -v "$tool" >/dev/null || die "$tool is missing: run 'make $flavour' as root (it installs the tools)"
done
mkdir -p "$cache"
root="$cache/${prefix}rootfs.tmp"
rm -rf "$root"
start=$(date +%s)

if [ $arch = arm64 ]; then
    step "1/4 binfmt_misc entry for aarch64 (qemu-aarch64-static)"
    binfmt_on
    trap 'binfmt_off; rm -rf "$root"' EXIT INT TERM
else
    step "1/4 $arch is this machine's architecture: no binfmt_misc entry needed"
    trap 'rm -rf "$root"' EXIT INT TERM
fi

step "2/4 mmdebstrap $suite $arch from $mirror ($packages): a few minutes (longer under emulation)"
# nice: the machine is shared; --verbose shows apt's progress (each package as it unpacks and configures).
# Before the kernels install: their initrds hold the virtio and ext4 modules only
# (MODULES=list and board/initramfs-hook). With Debian's default (most), mkinitramfs spends
# minutes per kernel under qemu-user copying every driver module.
# force-unsafe-io: no fsync per file (dpkg runs under emulation; the root is rebuilt on failure);
# no docs or translations: less to unpack under emulation, nothing the board reads (manuals
# stay: bash's postinst names one in update-alternatives, which reports an error without it).
nice -n 19 mmdebstrap --verbose --mode=root --arch=$arch --variant=minbase --include="$packages" \
    --dpkgopt=force-unsafe-io --aptopt='Acquire::Languages "none"' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --essential-hook='mkdir -p "$1/etc/initramfs-tools/conf.d" "$1/etc/initramfs-tools/hooks" && echo MODULES=list > "$1/etc/initramfs-tools/conf.d/board"' \
    --essential-hook="install -m 755 '$here/initramfs-hook' \"\$1/etc/initramfs-tools/hooks/board\"" \
    "$suite" "$root" "$mirror"
say "root filesystem done after $(( $(date +%s) - start )) s"

step "3/4 $flavour settings: network, sshd, root's key, serial console, fstab"
echo $hostname > "$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 %s\n' $hostname > "$root/etc/hosts"
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
# Host keys of this image, made here (never those of a cached root or another image):
# ssh-keygen -A writes every missing type under the root's /etc/ssh.
rm -f "$root"/etc/ssh/ssh_host_*
ssh-keygen -q -A -f "$root"
chmod 600 "$root"/etc/ssh/ssh_host_*_key
cp "$root/etc/ssh/ssh_host_ed25519_key.pub" "$cache/${prefix}host_key.pub"
# the agent's runs stay in /run/xtalk (tmpfs); nothing else to install: the board's agent is
# static, the guest's is the host's own (same suite, same glibc).
say "settings done"

step "4/4 kernels, initrds and the ext4 image"
for kind in $kernels; do
    case $kind in
        stock) k=$(ls "$root"/boot/vmlinuz-*-$arch | grep -v -- "-rt-$arch\$" | tail -1) ;;
        rt) k=$(ls "$root"/boot/vmlinuz-*-rt-$arch | tail -1) ;;
    esac
    [ -n "$k" ] || die "no $kind kernel in $root/boot"
    v=${k##*/vmlinuz-}
    cp "$k" "$cache/${prefix}vmlinuz-$kind"
    cp "$root/boot/initrd.img-$v" "$cache/${prefix}initrd-$kind"
    echo "$v" > "$cache/${prefix}version-$kind"
    say "$kind kernel: $v"
done
size_mb=$(( $(du -sm "$root" | cut -f1) + 768 ))
img="$cache/${prefix}rootfs.img"
rm -f "$img.tmp"
(umask 077 && nice -n 19 mkfs.ext4 -q -L $hostname -d "$root" "$img.tmp" "${size_mb}M")
mv "$img.tmp" "$img"
private_files "$cache"
say "$flavour image built in $(( $(date +%s) - start )) s: $img (${size_mb} MiB)"

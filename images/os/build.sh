#!/bin/bash
# Build the production OS image that provisioning writes to a node's disk as its last step (the talk: firmware
# first, from the RAM-only runtime, then the OS). The same builder as the runtime (mmdebstrap, Debian packages from
# packages.txt), a raw BIOS-bootable disk image: one MBR partition holding an ext4 root made by mke2fs -d straight
# from the mmdebstrap tree, and GRUB's own boot.img + core.img (grub-mkimage, root and kernel command line embedded)
# in the MBR and the gap before the partition. No loop device, mount or grub-install is needed on the build host.
# Usage: build.sh OUTDIR   (env: OS_MIRROR, OS_SECURITY_MIRROR, OS_SUITE, OS_CMDLINE_EXTRA, SOURCE_DATE_EPOCH)
# Writes OUTDIR/{symphony-os-x86_64.img.zst,manifest.txt,build.json}; a rerun with the same inputs returns at once.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
MIRROR=${OS_MIRROR:-http://deb.debian.org/debian}
SUITE=${OS_SUITE:-bookworm}
# The suite with its point-release and security updates (an empty OS_SECURITY_MIRROR leaves those out): the OS a
# customer gets runs the patched kernel and OpenSSH, and its apt sources (these lines) keep it patched.
SECURITY=${OS_SECURITY_MIRROR-http://deb.debian.org/debian-security}
SOURCES=("deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main")
[ -z "$SECURITY" ] || SOURCES+=("deb $SECURITY $SUITE-security main")
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1735689600}
# e2fsprogs stamps the superblock and inodes with this instead of the clock (reproducible-builds.org)
export E2FSPROGS_FAKE_TIME=$SOURCE_DATE_EPOCH
LABEL=symphony-os
# The SKUs' tunings.kernel_cmdline tokens (../tunings.cmdline): fleet_audit's drift check reads them on the node.
EXTRA=${OS_CMDLINE_EXTRA-$(grep -v '^#' "$HERE/../tunings.cmdline" | xargs)}
CMDLINE=$(echo "root=LABEL=$LABEL ro console=tty0 console=ttyS0,115200 net.ifnames=0 panic=30 $EXTRA" | xargs)
PKGS=$(grep -v '^#' "$HERE/packages.txt" | paste -sd, -)
IMG=symphony-os-x86_64.img

# The inputs' digest: the boot line, the apt sources, the definition files and the root overlay, in name order.
inputs=$( (cd "$HERE" && echo "$CMDLINE" && printf '%s\n' "${SOURCES[@]}" && sha256sum build.sh packages.txt && find rootfs -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) \
         | sha256sum | cut -c1-64)
if [ -f "$OUT/build.json" ] && grep -q "\"inputs\": \"$inputs\"" "$OUT/build.json"; then
  echo "os image: up to date ($(cat "$OUT/build-id"))"; exit 0
fi
for tool in mmdebstrap grub-mkimage sfdisk mke2fs debugfs zstd; do
  command -v "$tool" >/dev/null || { echo "os image: $tool is missing (make runtime installs it)" >&2; exit 1; }
done
start=$(date +%s)
work=$(mktemp -d "$OUT/.work.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root

# Docs, man pages and translations are dropped as in the runtime. The kernel's postinst builds the initramfs.
mmdebstrap --quiet --mode=root --format=directory --variant=minbase --include="$PKGS" \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --customize-hook='cp -a '"$HERE"'/rootfs/. "$1"/' \
  --customize-hook='chroot "$1" systemctl enable systemd-networkd.service symphony-ready.service' \
  --customize-hook='kver=$(ls "$1"/lib/modules); for d in drivers/gpu sound drivers/media drivers/net/wireless drivers/bluetooth drivers/staging net/bluetooth net/wireless net/mac80211 drivers/iio drivers/isdn; do rm -rf "$1/lib/modules/$kver/kernel/$d"; done; chroot "$1" depmod "$kver"; chroot "$1" update-initramfs -u -k "$kver"' \
  "$SUITE" "$root" "${SOURCES[@]}"

kver=$(ls "$root/lib/modules")
# No state that must differ per node: host keys are made at first boot (rootfs/etc/systemd/system/ssh.service.d),
# machine-id is made at first boot, no logs, no apt lists. The installer adds the controller's key and hostname.
rm -f "$root"/etc/ssh/ssh_host_* "$root"/var/log/*.log "$root"/var/log/apt/* "$root"/var/cache/ldconfig/aux-cache
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/tmp/* "$root"/var/cache/debconf/*-old
: > "$root/etc/machine-id"
echo "LABEL=$LABEL / ext4 errors=remount-ro 0 1" > "$root/etc/fstab"
echo symphony-os > "$root/etc/hostname"

{ chroot "$root" dpkg-query -W -f='${Package} ${Version} ${Architecture}\n'; } | LC_ALL=C sort > "$work/manifest.txt"
build_id=os-$( (echo "$inputs"; echo "$CMDLINE"; cat "$work/manifest.txt") | sha256sum | cut -c1-16)
install -D -m 0644 /dev/stdin "$root/etc/symphony/os-image-id" <<<"$build_id"
install -D -m 0644 "$work/manifest.txt" "$root/etc/symphony/manifest.txt"
# The installed OS carries the disk marker: a node that later claims to run the RAM-only runtime while this is
# visible booted its disk instead (_provision/proof.py).
install -D -m 0644 /dev/stdin "$root/var/lib/symphony/disk-marker" <<<"installed by symphony provisioning: $build_id"
find "$root" -depth -newermt "@$SOURCE_DATE_EPOCH" -exec touch --no-dereference --date="@$SOURCE_DATE_EPOCH" {} +

# The disk: 1 MiB for the MBR and GRUB's core.img, then the root partition sized to the tree plus a quarter and
# 128 MiB of room (the node's own disk is larger; the rest stays unpartitioned).
used_kib=$(du -sk "$root" | cut -f1)
fs_mib=$(( (used_kib * 5 / 4) / 1024 + 128 ))
disk=$work/$IMG
truncate -s $(( (fs_mib + 1) * 1048576 )) "$disk"
printf 'label: dos\nlabel-id: 0x53594d4f\nstart=2048, type=83, bootable\n' | sfdisk --quiet "$disk"
mke2fs -q -F -t ext4 -L "$LABEL" -U 5e1f0000-0000-4000-8000-53594d4f5301 \
  -E offset=1048576,root_owner=0:0,hash_seed=5e1f0000-0000-4000-8000-53594d4f5302 -d "$root" "$disk" "${fs_mib}M"
# mke2fs -d copies each file's ctime and atime, which are this build's clock (no tool sets a ctime, and reading a
# file moves its atime): both set to SOURCE_DATE_EPOCH in the new filesystem, so the same inputs and packages give
# the same disk bytes. A name debugfs cannot quote is refused rather than left with this build's time.
if (cd "$root" && find . -name '*"*' -o -name $'*\n*' | grep -q .); then
  echo "os image: a file name holds a double quote or newline; debugfs cannot set its times" >&2; exit 1
fi
(cd "$root" && find . -print | LC_ALL=C sort | sed 's|^\.$|/|; s|^\./|/|') \
  | awk -v t="@$SOURCE_DATE_EPOCH" '{printf "sif \"%s\" ctime %s\nsif \"%s\" atime %s\n", $0, t, $0, t}' > "$work/times.debugfs"
debugfs -w -f "$work/times.debugfs" "$disk?offset=1048576" > /dev/null 2> "$work/times.err"
if grep -v '^debugfs [0-9]' "$work/times.err" | grep -q .; then
  echo "os image: debugfs could not set the file times:" >&2; head -5 "$work/times.err" >&2; exit 1
fi

# GRUB for BIOS without grub-install: boot.img into the MBR's first 440 bytes (the partition table stays), core.img
# from sector 1 (boot.img's default kernel sector; diskboot's default blocklist loads the rest from sector 2).
cat > "$work/early.cfg" <<CFG
set root=(hd0,msdos1)
set timeout=0
linux /boot/vmlinuz-$kver $CMDLINE
initrd /boot/initrd.img-$kver
boot
CFG
grub-mkimage -O i386-pc -o "$work/core.img" -c "$work/early.cfg" -p '(hd0,msdos1)/boot/grub' \
  biosdisk part_msdos ext2 linux boot
if [ "$(stat -c %s "$work/core.img")" -gt $(( 2047 * 512 )) ]; then echo "os image: core.img too large" >&2; exit 1; fi
dd if=/usr/lib/grub/i386-pc/boot.img of="$disk" bs=440 count=1 conv=notrunc status=none
dd if="$work/core.img" of="$disk" bs=512 seek=1 conv=notrunc status=none

raw_sha=$(sha256sum "$disk" | cut -c1-64)
raw_bytes=$(stat -c %s "$disk")
zstd -q -T0 -9 --no-progress "$disk" -o "$work/$IMG.zst"
sha=$(sha256sum "$work/$IMG.zst" | cut -c1-64)
mib=$(( $(stat -c %s "$work/$IMG.zst") / 1048576 ))
os_id=$(. "$root/etc/os-release" && echo "$ID") ; os_version=$(. "$root/etc/os-release" && echo "$VERSION_ID")
mv "$work/$IMG.zst" "$work/manifest.txt" "$OUT/"
echo "$build_id" > "$OUT/build-id"
cat > "$OUT/build.json" <<JSON
{"build_id": "$build_id", "sha256": "$sha", "image": "$IMG.zst", "mib": $mib,
 "raw_sha256": "$raw_sha", "raw_bytes": $raw_bytes, "kernel": "$kver", "cmdline": "$CMDLINE",
 "os_release": {"ID": "$os_id", "VERSION_ID": "$os_version"}, "root_label": "$LABEL",
 "suite": "$SUITE", "mirror": "$MIRROR", "security_mirror": "$SECURITY", "inputs": "$inputs", "build_s": $(( $(date +%s) - start ))}
JSON
echo "os image: built $build_id ($mib MiB compressed, $(( raw_bytes / 1048576 )) MiB raw, sha256 $sha)"

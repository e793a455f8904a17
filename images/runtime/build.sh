#!/bin/bash
# Build the symphony RAM-only runtime: a Debian root made by mmdebstrap from packages.txt, packed whole as the
# initramfs (so / is the kernel's RAM rootfs), with the Debian kernel, on a BIOS-bootable ISO.
# Usage: build.sh OUTDIR   (env: RUNTIME_MIRROR, RUNTIME_SECURITY_MIRROR, RUNTIME_SUITE, RUNTIME_VENDOR_DIR,
#                            RUNTIME_CMDLINE_EXTRA, SOURCE_DATE_EPOCH)
# Writes OUTDIR/{symphony-runtime-x86_64.iso,vmlinuz,initrd.lz4,manifest.txt,build.json}; a rerun with the same
# inputs (boot line, apt sources, definition files) reuses OUTDIR and returns at once: remove OUTDIR to take the
# mirror's newer packages.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
MIRROR=${RUNTIME_MIRROR:-http://deb.debian.org/debian}
SUITE=${RUNTIME_SUITE:-bookworm}
# The suite with its point-release updates and security updates (an empty RUNTIME_SECURITY_MIRROR leaves those out):
# the kernel and sshd a node runs in the runtime are the patched ones.
SECURITY=${RUNTIME_SECURITY_MIRROR-http://deb.debian.org/debian-security}
SOURCES=("deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main")
[ -z "$SECURITY" ] || SOURCES+=("deb $SECURITY $SUITE-security main")
VENDOR=${RUNTIME_VENDOR_DIR:-$HERE/vendor.d}
# Fixed timestamps make the initramfs and the ISO byte-identical for the same inputs (reproducible-builds.org).
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1735689600}
# The SKUs' tunings.kernel_cmdline tokens (../tunings.cmdline) sit on the boot line: the tunings check reads them here.
EXTRA=${RUNTIME_CMDLINE_EXTRA-$(grep -v '^#' "$HERE/../tunings.cmdline" | xargs)}
CMDLINE=$(echo "console=tty0 console=ttyS0,115200 panic=30 $EXTRA symphony.runtime=1" | xargs)
PKGS=$(grep -v '^#' "$HERE/packages.txt" | paste -sd, -)

# The inputs' digest: the boot line, the apt sources, the definition files and the vendor hooks, in name order.
inputs=$( (cd "$HERE" && echo "$CMDLINE" && printf '%s\n' "${SOURCES[@]}" && sha256sum build.sh init isolinux.cfg packages.txt lib/*; \
           find "$VENDOR" -maxdepth 1 -name '*.sh' -type f -print0 | sort -z | xargs -0r sha256sum) | sha256sum | cut -c1-64)
if [ -f "$OUT/build.json" ] && grep -q "\"inputs\": \"$inputs\"" "$OUT/build.json"; then
  echo "runtime: up to date ($(cat "$OUT/build-id"))"; exit 0
fi
start=$(date +%s)
work=$(mktemp -d "$OUT/.work.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root

# Stage 1, cached by package list + apt sources: mmdebstrap's root as a tarball (the slow part, ~5 min).
# Docs, man pages and translations are not needed in RAM. The kernel package is downloaded, not installed: its
# postinst would build a disk-root initramfs we do not use. mmdebstrap unsets APT_CONFIG in hooks: without
# MMDEBSTRAP_APT_CONFIG the hook's apt would read the build host's sources, not the root's.
stage1=$OUT/cache/root-$( (printf '%s\n' "${SOURCES[@]}"; cat "$HERE/packages.txt") | sha256sum | cut -c1-16).tar
if [ ! -f "$stage1" ]; then
  mkdir -p "$OUT/cache"
  mmdebstrap --quiet --mode=root --format=tar --variant=essential --include="$PKGS" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --customize-hook='export APT_CONFIG=$MMDEBSTRAP_APT_CONFIG; kpkg=$(apt-cache depends linux-image-amd64 | awk "/Depends: linux-image-/{print \$2; exit}"); mkdir -p "$1/opt/kernel" && cd "$1/opt/kernel" && apt-get download "$kpkg"' \
    "$SUITE" "$stage1.part" "${SOURCES[@]}"
  mv "$stage1.part" "$stage1"
fi
mkdir -p "$root"
tar -x -C "$root" -f "$stage1"

# The kernel (its ./lib/modules goes through the usrmerge /lib symlink), minus the drivers a server runtime never needs (GPU DRM, sound, media, wireless), then depmod.
kdeb=$(ls "$root"/opt/kernel/linux-image-*.deb)
kver=$(dpkg-deb -f "$kdeb" Package | sed 's/^linux-image-//')
kdebver=$(dpkg-deb -f "$kdeb" Version)
dpkg-deb --fsys-tarfile "$kdeb" | tar -x --keep-directory-symlink -C "$root" --exclude='./usr/share/doc' \
  --exclude="./lib/modules/$kver/kernel/drivers/gpu" --exclude="./lib/modules/$kver/kernel/sound" \
  --exclude="./lib/modules/$kver/kernel/drivers/media" --exclude="./lib/modules/$kver/kernel/drivers/net/wireless" \
  --exclude="./lib/modules/$kver/kernel/drivers/bluetooth" --exclude="./lib/modules/$kver/kernel/drivers/staging" \
  --exclude="./lib/modules/$kver/kernel/net/bluetooth" --exclude="./lib/modules/$kver/kernel/net/wireless" \
  --exclude="./lib/modules/$kver/kernel/net/mac80211" --exclude="./lib/modules/$kver/kernel/drivers/iio" \
  --exclude="./lib/modules/$kver/kernel/drivers/isdn"
rm -rf "$root/opt/kernel"
chroot "$root" depmod "$kver"
mv "$root/boot/vmlinuz-$kver" "$work/vmlinuz"
rm -rf "$root"/boot/*

for hook in $(find "$VENDOR" -maxdepth 1 -name '*.sh' -type f | sort); do
  echo "runtime: vendor hook $hook"; "$hook" "$root"
done

install -m 0755 "$HERE/init" "$root/init"
install -D -m 0644 /dev/stdin "$root/etc/ssh/sshd_config.d/symphony-hostkey.conf" <<<"HostKey /etc/ssh/ssh_host_ed25519_key"
install -D -m 0644 "$HERE/lib/callback.py" "$root/usr/lib/symphony/callback.py"
# No state that must differ per node or per build: host keys and the NVMe host NQN/ID (nvme-cli's postinst makes a
# random pair, which every node would share) are made at boot, machine-id is empty, no logs/caches.
rm -f "$root"/etc/nvme/hostnqn "$root"/etc/nvme/hostid "$root"/etc/ssh/ssh_host_* "$root"/var/log/*.log "$root"/var/log/apt/* "$root"/var/cache/ldconfig/aux-cache
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/tmp/* "$root"/var/cache/debconf/*-old
: > "$root/etc/machine-id"
cat > "$root/etc/fstab" <<FSTAB
# symphony runtime: nothing from a local disk is mounted
FSTAB

# The package manifest (name version arch, sorted) and the build id derived from it and the inputs.
{ chroot "$root" dpkg-query -W -f='${Package} ${Version} ${Architecture}\n'; echo "linux-image-$kver $kdebver amd64 (unpacked)"; } \
  | LC_ALL=C sort > "$work/manifest.txt"
build_id=rt-$( (echo "$inputs"; echo "$CMDLINE"; cat "$work/manifest.txt") | sha256sum | cut -c1-16)
install -D -m 0644 /dev/stdin "$root/etc/symphony/build-id" <<<"$build_id"
install -D -m 0644 "$work/manifest.txt" "$root/etc/symphony/manifest.txt"

# Pack: fixed mtimes, sorted names, newc with no inode numbers/devices (cpio --reproducible). LZ4 (the kernel's
# legacy frame, lz4 -l) rather than zstd: the image grows by about half, but the kernel unpacks it in 4 s instead of
# 7.5 s under QEMU TCG, the bulk of a VM-backed node's boot (bench_runtime.py, boot_to_ssh_s_4).
# The kernel does not read past an LZ4 legacy stream, so nothing may be appended to it as a second initrd: vendor
# tools go in through vendor.d at build time, the controller's key and callback through the command line or SYMCFG.
find "$root" -depth -newermt "@$SOURCE_DATE_EPOCH" -exec touch --no-dereference --date="@$SOURCE_DATE_EPOCH" {} +
(cd "$root" && find . -mindepth 1 -print0 | LC_ALL=C sort -z | cpio --quiet --null -o -H newc --reproducible) \
  | lz4 -l -9 -q > "$work/initrd.lz4"

iso=$work/isoroot
mkdir -p "$iso/isolinux" "$iso/boot"
cp /usr/lib/ISOLINUX/isolinux.bin /usr/lib/syslinux/modules/bios/ldlinux.c32 "$iso/isolinux/"
sed "s|@CMDLINE@|$CMDLINE|" "$HERE/isolinux.cfg" > "$iso/isolinux/isolinux.cfg"
cp "$work/vmlinuz" "$work/initrd.lz4" "$iso/boot/"
echo "$build_id" > "$iso/BUILD_ID"
find "$iso" -exec touch --no-dereference --date="@$SOURCE_DATE_EPOCH" {} +
xorriso -as mkisofs -quiet -o "$work/symphony-runtime-x86_64.iso" -V SYMRUNTIME -isohybrid-mbr /usr/lib/ISOLINUX/isohdpfx.bin \
  -c isolinux/boot.cat -b isolinux/isolinux.bin -no-emul-boot -boot-load-size 4 -boot-info-table "$iso"

sha=$(sha256sum "$work/symphony-runtime-x86_64.iso" | cut -c1-64)
mib=$(( $(stat -c %s "$work/symphony-runtime-x86_64.iso") / 1048576 ))
for f in symphony-runtime-x86_64.iso vmlinuz initrd.lz4 manifest.txt; do mv "$work/$f" "$OUT/$f"; done
echo "$build_id" > "$OUT/build-id"
cat > "$OUT/build.json" <<JSON
{"build_id": "$build_id", "sha256": "$sha", "iso": "symphony-runtime-x86_64.iso", "mib": $mib,
 "kernel": "$kver", "cmdline": "$CMDLINE", "suite": "$SUITE", "mirror": "$MIRROR", "security_mirror": "$SECURITY",
 "inputs": "$inputs", "build_s": $(( $(date +%s) - start ))}
JSON
echo "runtime: built $build_id ($mib MiB, sha256 $sha)"

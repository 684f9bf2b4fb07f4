#!/usr/bin/env bash
# Packs what the GPU machine needs from a build here (nothing is compiled there): the daemon, kvtrie-bench,
# kvtrie-synth and the GPU test binaries (debug info stripped), the shared libraries they load that a bare
# machine lacks (all but the C/C++ runtime and the Vulkan loader), and the commit, as BIN/ in one tar.xz.
# bench/run_device.sh then takes the unpacked BIN folder.
#   bench/pack_device_bin.sh BUILD_DIR OUT.tar.xz
set -euo pipefail
build=$(cd "${1:?usage: pack_device_bin.sh BUILD_DIR OUT.tar.xz}" && pwd)
out=$(realpath -m "${2:?usage: pack_device_bin.sh BUILD_DIR OUT.tar.xz}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=$tmp/BIN
mkdir -p "$bin/lib"
. "$(dirname "$0")/gpu_tests.sh"
for b in kvtrie bench/kvtrie-bench bench/kvtrie-synth $(printf 'tests/%s ' $GPU_TESTS); do
  [ -x "$build/$b" ] && strip --strip-debug -o "$bin/$(basename "$b")" "$build/$b"
done
for b in "$bin"/*; do [ -f "$b" ] && ldd "$b" | awk '/=> \//{print $3}'; done | sort -u |
  grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libvulkan|libpthread|libdl|librt)\.so' |
  while read -r lib; do cp -L "$lib" "$bin/lib/"; done
git -C "$(dirname "$0")/.." rev-parse --short HEAD >"$bin/COMMIT"
git -C "$(dirname "$0")/.." diff --quiet HEAD || echo "$(cat "$bin/COMMIT")+dirty" >"$bin/COMMIT"
tar -C "$tmp" -cJf "$out" BIN
echo "packed $(du -h "$out" | cut -f1) into $out ($(ls "$bin" | wc -l) binaries, $(ls "$bin/lib" | wc -l) libraries)"

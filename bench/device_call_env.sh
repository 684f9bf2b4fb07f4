# Sourced at the start of a device call's script (the device tool runs it in the repository root, with
# .gl and .device carried): installs the Vulkan loader from .gl, unpacks the packed build
# (.device/bin.tar.xz, bench/pack_device_bin.sh) into $B, a second one (.device/old.tar.xz) into $B_OLD
# when present, and llama.cpp's peer (.device/llamacpp-peer.tar.xz) into $P; sets R (the repository),
# VK_DRIVER_FILES, LD_LIBRARY_PATH (the build's libraries) and GPU (the card's name), and prints the
# build's commit and the card.
R=$PWD
for f in "$R"/.gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/w /tmp/w-old
tar -C /tmp/w -xJf "$R/.device/bin.tar.xz"
tar -C /tmp/w -xJf "$R/.device/llamacpp-peer.tar.xz"
B=/tmp/w/BIN
P=/tmp/w/llamacpp-peer
B_OLD=
if [ -f "$R/.device/old.tar.xz" ]; then
  tar -C /tmp/w-old -xJf "$R/.device/old.tar.xz"
  B_OLD=/tmp/w-old/BIN
fi
export LD_LIBRARY_PATH=$B/lib
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "build $(cat "$B/COMMIT")${B_OLD:+, old build $(cat "$B_OLD/COMMIT")}; $GPU"

# table_on_h200 [TIMEOUT_S]: when the card is an H200 (issue 16's Q8_0 row needs one, and few calls get it),
# bench/run_device.sh's table with the session-12 settings into /tmp/rd, kept as $OUT/rd.tar.gz, its summary
# printed; nothing on other cards. Call scripts run it first.
table_on_h200() {
  [[ "$GPU" == *H200* ]] || return 0
  PEER_DIR=$P STEPS="limits models" PRESETS="llama3-8b llama3-1b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
    MODELS_DIR=/tmp/models timeout "${1:-330}" bench/run_device.sh "$B" /tmp/rd >/tmp/rd.out 2>&1
  echo "run_device rc=$?"
  grep -v "^\s*$" /tmp/rd/summary.md | head -40
  tar czf "$OUT/rd.tar.gz" -C /tmp rd 2>/dev/null
}

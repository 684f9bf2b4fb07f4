#!/usr/bin/env bash
# Session 24, call 10: the final code (the block-scan sampler and the greedy argmax on the GPU). H200: the
# table (run_device.sh, limits and models). H100: the HTTP multi-turn row again (run_device.sh's http step,
# the session-12 settings), whose 4.41x in call 1 predates the engine's changes.
R=$PWD
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/w && cd /tmp/w && tar xJf $R/.device/bin.tar.xz && tar xJf $R/.device/llamacpp-peer.tar.xz
B=/tmp/w/BIN; P=/tmp/w/llamacpp-peer
export LD_LIBRARY_PATH=$B/lib
cat $B/COMMIT; GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
cd $R
if [[ "$GPU" == *H200* ]]; then
  PEER_DIR=$P STEPS="limits models" PRESETS="llama3-8b llama3-1b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
    MODELS_DIR=/tmp/models timeout 400 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
else
  PEER_DIR=$P STEPS="http" PRESETS="llama3-8b" TYPES="Q4_0" HTTP_STREAM=0 HTTP_CONVERSATIONS=16 HTTP_TURNS=4 \
    MODELS_DIR=/tmp/models timeout 400 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
fi
echo "run_device rc=$?"; grep -v "^\s*$" /tmp/rd/summary.md | head -40
tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
echo done

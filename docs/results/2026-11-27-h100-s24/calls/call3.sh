#!/usr/bin/env bash
# Session 24, call 3: Q8_0 with the o weights prefetched, which call 2 found 1% faster: the table (bench/run_device.sh, the session-12 settings) on main 96bdb99, whatever card
# comes. H200: no http step, then --deterministic beside the default and the L2 prefetch plans on each 8B
# type (that card's read bandwidth leaves attention more idle time to fill). H100: with http, then
# --deterministic, and the o weights alone prefetched for Q4_K and Q8_0 (a plan not measured there yet).
R=$PWD
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/w && cd /tmp/w && tar xJf $R/.device/bin.tar.xz && tar xJf $R/.device/llamacpp-peer.tar.xz
B=/tmp/w/BIN; P=/tmp/w/llamacpp-peer
export LD_LIBRARY_PATH=$B/lib
cat $B/COMMIT; GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
dec() {  # label model ctx [extra]
  local lab=$1 m=/tmp/models/$2.gguf c=$3; shift 3
  timeout 40 $B/kvtrie-bench decode --model $m --context $c --sequences 1 --tokens 64 "$@" 2>>$OUT/bench.err |
    grep '^{' | sed "s/^{/{\"label\":\"$lab\",/" | tee -a $OUT/decode.jsonl | python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["bench"]=="decode": print(r["label"], r["model"], r["context"], round(r["tok_s"],1))'
}
mkdir -p /tmp/models
timeout 60 $B/kvtrie-synth --preset llama3-8b --type Q8_0 --threads 14 -o /tmp/models/llama3-8b-Q8_0.gguf > /dev/null 2>&1
timeout 60 $B/kvtrie-synth --preset llama3-1b --type Q8_0 --threads 14 -o /tmp/models/llama3-1b-Q8_0.gguf > /dev/null 2>&1
for c in 512 4096; do for i in 1 2 3; do for m in llama3-8b-Q8_0 llama3-1b-Q8_0; do
  dec none $m $c --no-prefetch; dec o $m $c --prefetch-o --prefetch-groups 512
  dec o_f8_g512 $m $c --prefetch-o --prefetch-ffn-mib 8 --prefetch-groups 512
done; done; done
echo done

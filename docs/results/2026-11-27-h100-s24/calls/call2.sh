#!/usr/bin/env bash
# Session 24, call 2 (call 1 ran the table; run_device removes its models): the table (bench/run_device.sh, the session-12 settings) on main 96bdb99, whatever card
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
for t in Q4_0 Q4_K Q8_0; do timeout 60 $B/kvtrie-synth --preset llama3-8b --type $t --threads 14 -o /tmp/models/llama3-8b-$t.gguf > /dev/null 2>&1; done
ls /tmp/models
for c in 512 4096; do for i in 1 2; do
  dec default llama3-8b-Q4_0 $c; dec det llama3-8b-Q4_0 $c --deterministic
done; done
if [[ "$GPU" == *H200* ]]; then
  for m in llama3-8b-Q4_0 llama3-8b-Q4_K llama3-8b-Q8_0; do for i in 1 2; do
    dec none $m 512 --no-prefetch; dec o $m 512 --prefetch-o --prefetch-groups 512
    dec o_f16_g512 $m 512 --prefetch-o --prefetch-ffn-mib 16 --prefetch-groups 512
    dec o_f32_g512 $m 512 --prefetch-o --prefetch-ffn-mib 32 --prefetch-groups 512
  done; done
else
  for m in llama3-8b-Q4_K llama3-8b-Q8_0; do for i in 1 2; do
    dec none $m 512 --no-prefetch; dec o $m 512 --prefetch-o --prefetch-groups 512
  done; done
fi
echo done

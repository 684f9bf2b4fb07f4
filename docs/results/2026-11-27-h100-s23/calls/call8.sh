#!/usr/bin/env bash
# Session 23, call 8 (the budget's last minutes): on an H200, the table (run_device.sh, the session-12
# settings) and the L2 prefetch rows that an H100 left open; on an H100, those rows again (8B Q4_0 and Q4_K at
# 512, none against o + 16 MiB with 512 groups, alternately).
R=$PWD
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/w && cd /tmp/w && tar xJf $R/.device/bin.tar.xz && tar xJf $R/.device/llamacpp-peer.tar.xz
B=/tmp/w/BIN; P=/tmp/w/llamacpp-peer
export LD_LIBRARY_PATH=$B/lib
cat $B/COMMIT; GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
dec() {  # label model ctx [extra]
  local lab=$1 m=$2 c=$3; shift 3
  timeout 30 $B/kvtrie-bench decode --model $m --context $c --sequences 1 --tokens 64 "$@" 2>>$OUT/bench.err |
    grep '^{' | sed "s/^{/{\"label\":\"$lab\",/" | tee -a $OUT/decode.jsonl | python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["bench"]=="decode": print(r["label"], r["model"], r["context"], round(r["tok_s"],1))'
}
if [[ "$GPU" == *H200* ]]; then
  cd $R
  PEER_DIR=$P STEPS="limits models" PRESETS="llama3-8b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
    MODELS_DIR=/tmp/models timeout 230 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
  echo "run_device rc=$?"
  head -40 /tmp/rd/summary.md
  tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
  timeout 60 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 14 -o /tmp/q40.gguf > $OUT/synth.log 2>&1
  for i in 1 2; do dec none /tmp/q40.gguf 512; dec o_f16_g512 /tmp/q40.gguf 512 --prefetch-o --prefetch-ffn-mib 16 --prefetch-groups 512; done
else
  timeout 60 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 14 -o /tmp/q40.gguf > $OUT/synth.log 2>&1
  timeout 90 $B/kvtrie-synth --preset llama3-8b --type Q4_K --threads 14 -o /tmp/q4k.gguf >> $OUT/synth.log 2>&1 &
  for i in 1 2 3 4; do dec none /tmp/q40.gguf 512; dec o_f16_g512 /tmp/q40.gguf 512 --prefetch-o --prefetch-ffn-mib 16 --prefetch-groups 512; done
  wait
  for i in 1 2 3; do dec none /tmp/q4k.gguf 512; dec o_f16_g512 /tmp/q4k.gguf 512 --prefetch-o --prefetch-ffn-mib 16 --prefetch-groups 512; done
fi

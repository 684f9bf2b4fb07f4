#!/usr/bin/env bash
# Session 26, call 5: the final code. H200: the table (issue 16), then the GPU tests. H100: the GPU tests,
# then one bench/disk_tier_ttft.py run (llama3-8b Q4_0) and the 8-request sampled row.
. bench/device_call_env.sh
gpu_tests() { PEER_DIR=$P STEPS="tests" MODELS_DIR=/tmp/rdmodels timeout 280 bench/run_device.sh $B /tmp/rt > $OUT/gpu_tests.log 2>&1
  echo "tests rc=$?"; grep -E "done in" $OUT/gpu_tests.log; }
if [[ "$GPU" == *H200* ]]; then
  PEER_DIR=$P STEPS="limits models" PRESETS="llama3-8b llama3-1b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
    MODELS_DIR=/tmp/rdmodels timeout 330 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
  echo "run_device rc=$?"; grep -v "^\s*$" /tmp/rd/summary.md | head -40
  tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
  gpu_tests
else
  gpu_tests
  mkdir -p /tmp/models /tmp/disk
  timeout 100 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 14 -o /tmp/models/m.gguf > /dev/null 2>&1
  timeout 150 python3 bench/disk_tier_ttft.py $B /tmp/models/m.gguf /tmp/disk/d 2>>$OUT/disk.err | tee $OUT/disk_tier_ttft.jsonl |
    python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l); print(r["step"], r.get("ttft_ms", r.get("gbs")), r.get("cached_tokens_disk",""))'
  timeout 60 $B/kvtrie-bench multiturn --model /tmp/models/m.gguf --conversations 8 --turns 1 --system 512 --user 16 \
    --answer 512 --parallel 8 --no-baseline --temperature 0.8 2>/dev/null | tee $OUT/multiturn.jsonl | cut -c1-400
fi
echo done

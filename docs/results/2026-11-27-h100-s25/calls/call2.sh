#!/usr/bin/env bash
# Session 25, call 2 (branch s25-disk-overlap): H200: the table (run_device.sh, limits and models, the
# session-12 settings), then the disk tier's TTFT. H100: the disk tier's TTFT on llama3-8b Q4_0 (both modes:
# the overlap and the whole read, cold and warm page cache, bench/disk_tier_ttft.py), then every GPU test.
. bench/device_call_env.sh
mkdir -p /tmp/models
disk_ttft() {
  timeout 90 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 14 -o /tmp/models/llama3-8b-Q4_0.gguf > /dev/null 2>&1
  mkdir -p /tmp/disk
  for run in 1 2; do
    timeout 200 python3 bench/disk_tier_ttft.py $B /tmp/models/llama3-8b-Q4_0.gguf /tmp/disk/d 2>>$OUT/disk.err |
      tee -a $OUT/disk_tier_ttft.jsonl | python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l); print(r["step"], r.get("ttft_ms", r.get("gbs")), r.get("cached_tokens_disk",""), flush=True)'
  done
  cp /tmp/disk/d.log $OUT/disk_daemon.log 2>/dev/null
}
if [[ "$GPU" == *H200* ]]; then
  PEER_DIR=$P STEPS="limits models" PRESETS="llama3-8b llama3-1b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
    MODELS_DIR=/tmp/rdmodels timeout 380 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
  echo "run_device rc=$?"; grep -v "^\s*$" /tmp/rd/summary.md | head -40
  tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
  disk_ttft
else
  disk_ttft
  STEPS="tests" timeout 280 bench/run_device.sh $B /tmp/rdt > $OUT/gpu_tests.log 2>&1
  echo "tests rc=$?"; tail -30 $OUT/gpu_tests.log; tar czf $OUT/rdt.tar.gz -C /tmp rdt 2>/dev/null
fi
echo done

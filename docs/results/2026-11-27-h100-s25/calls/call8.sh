#!/usr/bin/env bash
# Session 25, call 8: H200: the table (the card issue 16's Q8_0 row needs). H100: the disk overlap with the
# engine's debug log (each overlapped step's size, where the read was, and when), cold and warm, twice.
. bench/device_call_env.sh
if [[ "$GPU" == *H200* ]]; then
  PEER_DIR=$P STEPS="limits models" PRESETS="llama3-8b llama3-1b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
    MODELS_DIR=/tmp/rdmodels timeout 450 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
  echo "run_device rc=$?"; grep -v "^\s*$" /tmp/rd/summary.md | head -40
  tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
else
  mkdir -p /tmp/models /tmp/disk
  timeout 90 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 14 -o /tmp/models/llama3-8b-Q4_0.gguf > /dev/null 2>&1
  for r in 1 2; do
    timeout 200 python3 bench/disk_tier_ttft.py $B /tmp/models/llama3-8b-Q4_0.gguf /tmp/disk/d --daemon-args "--log-level debug" 2>>$OUT/disk.err |
      tee -a $OUT/disk_tier_ttft.jsonl | python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l); print(r["step"], r.get("ttft_ms", r.get("gbs")), r.get("cached_tokens_disk",""), flush=True)'
    grep -E "computing [0-9]+ prompt tokens|met its disk read|POST /generate|engine: step" /tmp/disk/d.log | cut -c1-200 > $OUT/debug_$r.log
    cp /tmp/disk/d.log $OUT/daemon_$r.log
  done
  grep -E "computing|met its" $OUT/debug_2.log | head -40
fi
echo done

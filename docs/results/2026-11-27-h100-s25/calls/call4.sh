#!/usr/bin/env bash
# Session 25, call 4: the disk overlap's steps, 64 tokens doubling (new, $B) against 256 each (old, $B_OLD),
# alternately, with bench/disk_tier_ttft.py on llama3-8b Q4_0. H200: the table first.
. bench/device_call_env.sh
mkdir -p /tmp/models /tmp/disk
disk_ttft() {  # label bin
  timeout 200 python3 bench/disk_tier_ttft.py $2 /tmp/models/llama3-8b-Q4_0.gguf /tmp/disk/d 2>>$OUT/disk.err |
    sed "s/^{/{\"build\":\"$1\",/" | tee -a $OUT/disk_tier_ttft.jsonl | python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l); print(r["build"], r["step"], r.get("ttft_ms", r.get("gbs")), r.get("cached_tokens_disk",""), flush=True)'
  grep "met its disk read" /tmp/disk/d.log >> $OUT/meets_$1.log 2>/dev/null
}
if [[ "$GPU" == *H200* ]]; then
  PEER_DIR=$P STEPS="limits models" PRESETS="llama3-8b llama3-1b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
    MODELS_DIR=/tmp/rdmodels timeout 380 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
  echo "run_device rc=$?"; grep -v "^\s*$" /tmp/rd/summary.md | head -40
  tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
  ROUNDS=1
else
  ROUNDS=3
fi
timeout 90 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 14 -o /tmp/models/llama3-8b-Q4_0.gguf > /dev/null 2>&1
for r in $(seq $ROUNDS); do disk_ttft new $B; disk_ttft old $B_OLD; done
cat $OUT/meets_new.log | sed 's/.*kv disk tier: //'
echo done

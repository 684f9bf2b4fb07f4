#!/usr/bin/env bash
# Session 25, call 10: H200: the table. H100: the disk overlap's first step of 512 tokens (new, $B) against
# 64 (old, $B_OLD; both doubling), alternately, with bench/disk_tier_ttft.py on llama3-8b Q4_0.
. bench/device_call_env.sh
if [[ "$GPU" == *H200* ]]; then
  PEER_DIR=$P STEPS="limits models" PRESETS="llama3-8b llama3-1b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
    MODELS_DIR=/tmp/rdmodels timeout 380 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
  echo "run_device rc=$?"; grep -v "^\s*$" /tmp/rd/summary.md | head -40
  tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
else
  mkdir -p /tmp/models /tmp/disk
  timeout 90 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 14 -o /tmp/models/llama3-8b-Q4_0.gguf > /dev/null 2>&1
  for r in 1 2; do for v in new old; do
    bin=$B; [ $v = old ] && bin=$B_OLD
    timeout 150 python3 bench/disk_tier_ttft.py $bin /tmp/models/llama3-8b-Q4_0.gguf /tmp/disk/d 2>>$OUT/disk.err |
      sed "s/^{/{\"build\":\"$v\",/" | tee -a $OUT/disk_tier_ttft.jsonl | python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["step"].startswith("disk") or r["step"]=="cold": print(r["build"], r["step"], r.get("ttft_ms"), r.get("cached_tokens_disk",""), flush=True)'
    grep "met its" /tmp/disk/d.log | sed "s/^/$v /" >> $OUT/meets.log
  done; done
  cut -c1-170 $OUT/meets.log
fi
echo done

#!/usr/bin/env bash
# Session 26, call 3. H200: the table (issue 16), then one disk-tier run. H100: bench/disk_tier_ttft.py,
# llama3-8b Q4_0, new ($B, fcc8f70: host commits held from before a disk hit's read until its prompt is
# computed) against old ($B_OLD, 98ced3e: held while the read is in flight, from after it started; run with
# --no-warmup), alternately, three runs each.
. bench/device_call_env.sh
mkdir -p /tmp/models /tmp/disk
synth() { timeout 100 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 14 -o /tmp/models/m.gguf > /dev/null 2>&1; }
disk_run() {  # $1: new|old
  local bin=$B extra="--log-level debug"; [ "$1" = old ] && { bin=$B_OLD; extra="$extra --no-warmup"; }
  timeout 150 python3 bench/disk_tier_ttft.py $bin /tmp/models/m.gguf /tmp/disk/d --daemon-args "$extra" \
    2>>$OUT/disk.err | sed "s/^{/{\"build\":\"$1\",/" | tee -a $OUT/disk_tier_ttft.jsonl | python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["step"].startswith("disk") or r["step"] in ("cold","host_hit"): print(r["build"], r["step"], r.get("ttft_ms"), r.get("cached_tokens_disk",""), flush=True)'
  grep -E "met its|computing .* prompt tokens" /tmp/disk/d.log | sed "s/^/$1 /" >> $OUT/disk_daemon.log
  cp /tmp/disk/d.log $OUT/disk_daemon_full_$1.log
}
if [[ "$GPU" == *H200* ]]; then
  PEER_DIR=$P STEPS="limits models" PRESETS="llama3-8b llama3-1b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
    MODELS_DIR=/tmp/rdmodels timeout 380 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
  echo "run_device rc=$?"; grep -v "^\s*$" /tmp/rd/summary.md | head -40
  tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
  synth && disk_run new
else
  synth
  for v in new old new old new old; do disk_run $v; done
  grep -E "met its|computing" $OUT/disk_daemon.log | cut -c1-170
fi
echo done

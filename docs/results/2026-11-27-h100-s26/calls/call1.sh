#!/usr/bin/env bash
# Session 26, call 1. H200: the table first (issue 16), then one disk-tier run. H100: a fresh daemon's first
# requests and bench/disk_tier_ttft.py, new build ($B: the host tier's first chunks committed at load,
# commits held while a disk read is in flight, a run in the page cache read whole) against the old ($B_OLD,
# aeba331), alternately, on llama3-8b Q4_0.
. bench/device_call_env.sh
mkdir -p /tmp/models /tmp/disk
synth() { timeout 100 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 14 -o /tmp/models/m.gguf > /dev/null 2>&1; }
disk_run() {  # $1: new|old
  local bin=$B; [ "$1" = old ] && bin=$B_OLD
  timeout 150 python3 bench/disk_tier_ttft.py $bin /tmp/models/m.gguf /tmp/disk/d --daemon-args "--log-level debug" \
    2>>$OUT/disk.err | sed "s/^{/{\"build\":\"$1\",/" | tee -a $OUT/disk_tier_ttft.jsonl | python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["step"].startswith("disk") or r["step"] in ("cold","host_hit"): print(r["build"], r["step"], r.get("ttft_ms"), r.get("cached_tokens_disk",""), flush=True)'
  grep -E "met its|load: weights|computing .* prompt tokens" /tmp/disk/d.log | sed "s/^/$1 /" >> $OUT/disk_daemon_$1.log
}
if [[ "$GPU" == *H200* ]]; then
  PEER_DIR=$P STEPS="limits models" PRESETS="llama3-8b llama3-1b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
    MODELS_DIR=/tmp/rdmodels timeout 380 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
  echo "run_device rc=$?"; grep -v "^\s*$" /tmp/rd/summary.md | head -40
  tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
  synth && disk_run new
else
  synth
  for v in new old new old; do
    bin=$B; [ $v = old ] && bin=$B_OLD
    timeout 60 python3 bench/first_requests.py $bin /tmp/models/m.gguf | sed "s/^{/{\"build\":\"$v\",/" |
      tee -a $OUT/first_requests.jsonl | tr '\n' ' ' | cut -c1-400; echo
    grep "load: weights" /tmp/first_requests.log | sed "s/^/$v /" >> $OUT/first_requests_load.log
  done
  for v in new old new old; do disk_run $v; done
  cut -c1-300 $OUT/first_requests_load.log
fi
echo done

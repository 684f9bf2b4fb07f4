#!/usr/bin/env bash
# Session 26, call 2. H200: the table (issue 16), then the GPU tests. H100: the warm-up at load, A/B in one
# build (98ced3e, --no-warmup), on a fresh daemon's first requests and bench/disk_tier_ttft.py (llama3-8b
# Q4_0), then every GPU test binary.
. bench/device_call_env.sh
mkdir -p /tmp/models /tmp/disk
synth() { timeout 100 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 14 -o /tmp/models/m.gguf > /dev/null 2>&1; }
gpu_tests() { PEER_DIR=$P STEPS="tests" MODELS_DIR=/tmp/rdmodels timeout 300 bench/run_device.sh $B /tmp/rt > $OUT/gpu_tests.log 2>&1
  echo "tests rc=$?"; grep -E "FAILED|PASSED|passed|failed" $OUT/gpu_tests.log | tail -25; }
if [[ "$GPU" == *H200* ]]; then
  PEER_DIR=$P STEPS="limits models" PRESETS="llama3-8b llama3-1b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
    MODELS_DIR=/tmp/rdmodels timeout 380 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
  echo "run_device rc=$?"; grep -v "^\s*$" /tmp/rd/summary.md | head -40
  tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
  gpu_tests
else
  synth
  for v in warm cold warm cold; do
    extra=""; [ $v = cold ] && extra="--no-warmup"
    timeout 60 python3 bench/first_requests.py $B /tmp/models/m.gguf --daemon-args "$extra" | sed "s/^{/{\"run\":\"$v\",/" |
      tee -a $OUT/first_requests.jsonl | python3 -c 'import json,sys
print(" ".join(str(round(json.loads(l)["ttft_ms"])) for l in sys.stdin))'
    grep -E "load: weights|warm-up" /tmp/first_requests.log | sed "s/^/$v /" | grep -o "$v.*\(ahead of use.*\|warm-up.*\)" >> $OUT/first_requests_load.log
  done
  for v in warm cold warm cold; do
    extra="--log-level debug"; [ $v = cold ] && extra="$extra --no-warmup"
    timeout 150 python3 bench/disk_tier_ttft.py $B /tmp/models/m.gguf /tmp/disk/d --daemon-args "$extra" \
      2>>$OUT/disk.err | sed "s/^{/{\"run\":\"$v\",/" | tee -a $OUT/disk_tier_ttft.jsonl | python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["step"].startswith("disk") or r["step"] in ("cold","host_hit"): print(r["run"], r["step"], r.get("ttft_ms"), r.get("cached_tokens_disk",""), flush=True)'
    grep -E "met its|warm-up|computing .* prompt tokens" /tmp/disk/d.log | sed "s/^/$v /" >> $OUT/disk_daemon.log
  done
  cp /tmp/disk/d.log $OUT/disk_daemon_last_full.log
  cat $OUT/first_requests_load.log | cut -c1-200
  gpu_tests
fi
echo done

#!/usr/bin/env bash
# Session 27, call 4. An H200: the table first (issue 16). Sampled rows' top_k_rows merging sorted lists in a
# tree (new, $B: 1024 invocations a work group; mid: the same with 256) against the merge sorting windows of
# 2,048 (old, $B_OLD: 2e8aac8, the same code for Q4_0 files), alternately, through GpuEngine at temperature
# 0.8 (llama3-8b and llama3-1b Q4_0): one request and 8 at once. Then (an H100) every GPU test binary.
. bench/device_call_env.sh
mkdir -p /tmp/w-mid && tar -C /tmp/w-mid -xJf .device/mid.tar.xz && MID=/tmp/w-mid/MID
M=/tmp/m2; mkdir -p $M
(timeout 60 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 8 -o $M/8b.gguf;
 timeout 60 $B/kvtrie-synth --preset llama3-1b --type Q4_0 --threads 8 -o $M/1b.gguf) > /tmp/synth.log 2>&1 &
SP=$!
if [[ "$GPU" == *H200* ]]; then
  PEER_DIR=$P STEPS="limits models" PRESETS="llama3-8b llama3-1b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
    MODELS_DIR=/tmp/models timeout 330 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
  echo "run_device rc=$?"; grep -v "^\s*$" /tmp/rd/summary.md | head -36
  tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
fi
wait $SP
mt() {  # label bench-binary model conversations [extra]
  local lab=$1 bin=$2 m=$M/$3.gguf c=$4; shift 4
  timeout 60 $bin --model $m --conversations $c --turns 1 --system 512 --user 16 --answer 512 \
    --parallel $c --no-baseline "$@" 2>>/tmp/bench.err | grep '^{' | sed "s/^{/{\"label\":\"$lab\",/" | tee -a $OUT/multiturn.jsonl |
    python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["bench"]!="multiturn": continue
  ttft=r.get("ttft_cold_ms") or 0
  print(r["label"], r["model"], r["conversations"], r["temperature"], "completion tok/s", round(r["completion_tok_s"],1), "decode tok/s (1 conv)", round((r["completion_tokens"]-1)/(r["seconds"]-ttft/1e3),1), flush=True)'
}
for i in 1 2; do for m in 8b 1b; do for c in 1 8; do
  [ $m = 8b ] && [ $c = 8 ] && continue
  mt old "$B_OLD/kvtrie-bench multiturn" $m $c --temperature 0.8
  mt new "$B/kvtrie-bench multiturn" $m $c --temperature 0.8
  mt mid256 "$MID/kvtrie-bench multiturn" $m $c --temperature 0.8
done; done; done
mt new-greedy "$B/kvtrie-bench multiturn" 1b 1; mt old-greedy "$B_OLD/kvtrie-bench multiturn" 1b 1
[[ "$GPU" == *H200* ]] || { PEER_DIR=$P STEPS="tests" MODELS_DIR=/tmp/rdmodels timeout 300 bench/run_device.sh $B /tmp/rt > $OUT/gpu_tests.log 2>&1
  echo "tests rc=$?"; grep -E "^\[.*(== test|done in)|FAILED" $OUT/gpu_tests.log | tail -8; }
echo done

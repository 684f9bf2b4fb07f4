#!/usr/bin/env bash
# Session 27, call 7. An H200: the table first (issue 16). top_k_rows' merge in a window of 4096 slots (new,
# $B) against 2048 (old, $B_OLD: 4348738), alternately: sampled decode at temperature 0.8, without and with
# repeat_penalty 1.1 (the best 64 and the best 128 a row), llama3-1b and llama3-8b Q4_0, one request; then
# every GPU test binary on the new build.
. bench/device_call_env.sh
M=/tmp/m2; mkdir -p $M
(timeout 60 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 8 -o $M/8b.gguf;
 timeout 60 $B/kvtrie-synth --preset llama3-1b --type Q4_0 --threads 8 -o $M/1b.gguf) > /tmp/synth.log 2>&1 &
SP=$!
table_on_h200
wait $SP
mt() {  # label bin model [extra]
  local lab=$1 bin=$2 m=$M/$3.gguf; shift 3
  timeout 60 $bin/kvtrie-bench multiturn --model $m --conversations 1 --turns 1 --system 512 --user 16 --answer 512 \
    --parallel 1 --no-baseline "$@" 2>>/tmp/bench.err | grep '^{' | sed "s/^{/{\"label\":\"$lab\",/" | tee -a $OUT/multiturn.jsonl |
    python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["bench"]!="multiturn": continue
  ttft=r.get("ttft_cold_ms") or 0
  print(r["label"], r["model"], r["temperature"], r["repeat_penalty"], "decode tok/s", round((r["completion_tokens"]-1)/(r["seconds"]-ttft/1e3),1), flush=True)'
}
for i in 1 2; do for m in 1b 8b; do for rp in 1 1.1; do
  mt old $B_OLD $m --temperature 0.8 --repeat-penalty $rp; mt new $B $m --temperature 0.8 --repeat-penalty $rp
done; done; done
PEER_DIR=$P STEPS="tests" MODELS_DIR=/tmp/rdmodels timeout 300 bench/run_device.sh $B /tmp/rt > $OUT/gpu_tests.log 2>&1
echo "tests rc=$?"; grep -E "done in|FAILED" $OUT/gpu_tests.log | tail -5
echo done

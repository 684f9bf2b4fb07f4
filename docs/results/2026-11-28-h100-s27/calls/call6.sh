#!/usr/bin/env bash
# Session 27, call 6. An H200: the table first (issue 16). Penalized top-k sampling (temperature 0.8,
# repeat_penalty 1.1 over the last 64: Ollama's defaults) drawing from the GPU's best 128 logits a row
# (default) against reading every sampled row back (--no-gpu-top-candidates: what 835d975 did for penalized
# rows), alternately, the same binary, llama3-8b and llama3-1b Q4_0, one request and 8 at once; unpenalized
# sampling and greedy beside it. Then the GPU tests of the top paths.
. bench/device_call_env.sh
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
mt() {  # label model conversations [extra]
  local lab=$1 m=$M/$2.gguf c=$3; shift 3
  timeout 60 $B/kvtrie-bench multiturn --model $m --conversations $c --turns 1 --system 512 --user 16 --answer 512 \
    --parallel $c --no-baseline "$@" 2>>/tmp/bench.err | grep '^{' | sed "s/^{/{\"label\":\"$lab\",/" | tee -a $OUT/multiturn.jsonl |
    python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["bench"]!="multiturn": continue
  ttft=r.get("ttft_cold_ms") or 0
  print(r["label"], r["model"], r["conversations"], r["temperature"], r["repeat_penalty"], "completion tok/s", round(r["completion_tok_s"],1), "decode tok/s (1 conv)", round((r["completion_tokens"]-1)/(r["seconds"]-ttft/1e3),1), flush=True)'
}
for i in 1 2; do for m in 8b 1b; do for c in 1 8; do
  mt rows $m $c --temperature 0.8 --repeat-penalty 1.1 --no-gpu-top-candidates
  mt top128 $m $c --temperature 0.8 --repeat-penalty 1.1
done; done; done
for m in 8b 1b; do mt top64 $m 1 --temperature 0.8; mt greedy $m 1; done
cd /tmp/w/BIN && for t in kernels_test_top_k_rows runner_test_gpu_model runner_test_gpu_engine; do
  timeout 120 ./$t --gtest_brief=1 > $OUT/$t.log 2>&1; echo "$t rc=$?"; grep -E "PASSED|FAILED" $OUT/$t.log | head -5; done
echo done

#!/usr/bin/env bash
# Session 33, call 6: the final build: the HTTP multi-turn row (run_device.sh's http step, 8 clients, 16
# conversations x 4 turns as in session 25, greedy: the engine's steps go ahead while all 8 decode), then one
# and eight greedy requests through GpuEngine with and without steps ahead.
. bench/device_call_env.sh
PEER_DIR=$P STEPS="http" PRESETS="llama3-8b" TYPES="Q4_0" HTTP_STREAM=0 HTTP_CONVERSATIONS=16 HTTP_TURNS=4 \
  MODELS_DIR=/tmp/models timeout 330 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
echo "run_device http rc=$?"; grep -v "^\s*$" /tmp/rd/summary.md | head -20
cp /tmp/rd/side_by_side.jsonl /tmp/rd/summary.md /tmp/rd/results.jsonl $OUT/ 2>/dev/null
grep -h "kvtrie_steps_ahead_total\|gpu_greedy_total" /tmp/rd/*.log 2>/dev/null | head
make_models 8b-Q4_0
wait_models
for r in 1 2; do
  for a in "" --no-ahead; do
    timeout 100 $B/kvtrie-bench multiturn --model $M/8b-Q4_0.gguf --conversations 1 --turns 1 --system 512 --user 16 \
      --answer 512 --parallel 1 --no-baseline $a 2>/dev/null | grep '"multiturn' | tee -a $OUT/engine.jsonl |
      python3 -c "import json,sys; r=json.loads(sys.stdin.read()); print('8b 1 req ahead=', r['greedy_ahead'], r['completion_tok_s'], r['seconds'], r.get('ttft_cold_ms'))"
  done
done
echo done

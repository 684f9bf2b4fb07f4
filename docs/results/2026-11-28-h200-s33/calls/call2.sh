#!/usr/bin/env bash
# Session 33, call 2 (7fd2ce0): greedy steps submitted ahead. GPU tests of GpuModel's steps ahead and the
# engine; decode with the logits read back (rows, the table's), --greedy, and --ahead, alternately; one and
# eight greedy requests through GpuEngine with and without the chain.
. bench/device_call_env.sh
make_models 8b-Q4_0 1b-Q4_0 8b-Q4_K 8b-Q8_0
for t in runner_test_gpu_model_ahead runner_test_gpu_engine; do
  timeout 120 $B/$t --gtest_brief=1 > $OUT/$t.log 2>&1; echo "$t rc=$?"; grep -E "PASSED|FAILED|SKIPPED" $OUT/$t.log | head -3
done
wait_models
for r in 1 2 3; do
  dec $B rows 8b-Q4_0 512
  dec $B greedy 8b-Q4_0 512 --greedy
  dec $B ahead 8b-Q4_0 512 --ahead
done
for r in 1 2; do
  dec $B rows 1b-Q4_0 512
  dec $B greedy 1b-Q4_0 512 --greedy
  dec $B ahead 1b-Q4_0 512 --ahead
done
for m in 8b-Q4_K 8b-Q8_0; do dec $B rows $m 512; dec $B ahead $m 512 --ahead; done
dec $B rows 8b-Q4_0 4096; dec $B ahead 8b-Q4_0 4096 --ahead
dec $B rows 8b-Q4_0 512 --sequences 8; dec $B ahead 8b-Q4_0 512 --sequences 8 --ahead
decode_summary
for m in 8b-Q4_0 1b-Q4_0; do
  for r in 1 2; do
    for a in "" --no-ahead; do
      timeout 100 $B/kvtrie-bench multiturn --model $M/$m.gguf --conversations 1 --turns 1 --system 512 --user 16 \
        --answer 512 --parallel 1 --no-baseline $a 2>/dev/null | grep '"multiturn' | tee -a $OUT/engine.jsonl |
        python3 -c "import json,sys; r=json.loads(sys.stdin.read()); print('$m 1 req ahead=', r['greedy_ahead'], r['completion_tok_s'], r['seconds'], r.get('ttft_cold_ms'))"
    done
  done
done
for a in "" --no-ahead ""  --no-ahead; do
  timeout 100 $B/kvtrie-bench multiturn --model $M/8b-Q4_0.gguf --conversations 8 --turns 1 --system 512 --user 16 \
    --answer 256 --parallel 8 --no-baseline $a 2>/dev/null | grep '"multiturn' | tee -a $OUT/engine.jsonl |
    python3 -c "import json,sys; r=json.loads(sys.stdin.read()); print('8b 8 req ahead=', r['greedy_ahead'], r['completion_tok_s'], r['seconds'])"
done
echo done

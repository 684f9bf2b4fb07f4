#!/usr/bin/env bash
# Session 33, call 1 (541c1d9's binary): the baseline for chaining greedy steps on the GPU. The decode step
# with its logits read back (the table's) against --greedy (argmax on the GPU, 4 bytes back), each with
# --span (time outside the device); and one greedy request through GpuEngine (multiturn, 1 conversation).
. bench/device_call_env.sh
make_models 8b-Q4_0 1b-Q4_0
wait_models
for r in 1 2; do
  for m in 8b-Q4_0 1b-Q4_0; do
    dec $B rows $m 512 --span
    dec $B greedy $m 512 --greedy --span
  done
done
decode_summary
grep decode_span $OUT/decode.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l); print(r['label'], r['model'], round(r['wall_ms'],4), round(r['gpu_span_ms'],4), round(r['outside_us'],1))"
for m in 8b-Q4_0 1b-Q4_0; do
  for r in 1 2; do
    timeout 100 $B/kvtrie-bench multiturn --model $M/$m.gguf --conversations 1 --turns 1 --system 512 --user 16 \
      --answer 512 --parallel 1 --no-baseline 2>/dev/null | grep multiturn | tee -a $OUT/engine.jsonl |
      python3 -c "import json,sys; r=json.loads(sys.stdin.read()); print('$m engine', r['completion_tok_s'], r['seconds'], r.get('ttft_cold_ms'))"
  done
done
echo done

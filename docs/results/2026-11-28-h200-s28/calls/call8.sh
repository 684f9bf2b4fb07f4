#!/usr/bin/env bash
# Session 28, call 8, asked of an H100 (nvidia-h100-x1) with the session's last device time: do the residual
# products' two-subgroup lanes hold on the card of sessions 22-27? Old (3022c3d) against new (the final
# code), alternately, 8B Q4_0 and Q8_0 one sequence at 512, two rounds, then 8 sequences of Q4_0 once.
. bench/device_call_env.sh
M=/tmp/m; mkdir -p $M
timeout 40 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 16 -o $M/8b-Q4_0.gguf > /dev/null 2>&1
timeout 50 $B/kvtrie-synth --preset llama3-8b --type Q8_0 --threads 16 -o $M/8b-Q8_0.gguf > /dev/null 2>&1
dec() {  # build label model sequences
  timeout 30 $1/kvtrie-bench decode --model $M/$3.gguf --context 512 --sequences $4 --tokens 32 \
    2>/dev/null | grep '"decode"' | sed "s/^{/{\"label\":\"$2\",/" | tee -a $OUT/decode.jsonl |
    python3 -c 'import json,sys
for l in sys.stdin: r=json.loads(l); print(r["label"], r["model"], r["sequences"], round(r["tok_s"],1), flush=True)'
}
for round in 1 2; do
  for m in 8b-Q4_0 8b-Q8_0; do dec $B_OLD old $m 1; dec $B new $m 1; done
done
dec $B_OLD old 8b-Q4_0 8; dec $B new 8b-Q4_0 8
echo done

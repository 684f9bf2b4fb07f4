#!/usr/bin/env bash
# Session 27, call 1. An H200: the table first (issue 16). Then where 8B Q8_0's decode step goes: the
# products' shapes (sweep-matvec, with the probes nodot and coalesced: Q8_0's units loaded as 16 neighbouring
# words a load), the step's profile at 512 and 4096 (Q8_0 and Q4_0), and the decode pass at 512 and 4096.
. bench/device_call_env.sh
M=/tmp/m; mkdir -p $M
(timeout 150 $B/kvtrie-synth --preset llama3-8b --type Q8_0 --threads 8 -o $M/8b-q8.gguf;
 timeout 90 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 8 -o $M/8b-q4.gguf) > $OUT/synth.log 2>&1 &
SP=$!
if [[ "$GPU" == *H200* ]]; then
  PEER_DIR=$P STEPS="limits models" PRESETS="llama3-8b llama3-1b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
    MODELS_DIR=/tmp/models timeout 330 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
  echo "run_device rc=$?"; grep -v "^\s*$" /tmp/rd/summary.md | head -36
  tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
fi
sw() {  # label args...
  local lab=$1; shift
  timeout 90 $B/kvtrie-bench sweep-matvec --model llama3-8b --tokens 1 --variants q8i "$@" \
    > $OUT/sweep_$lab.jsonl 2> $OUT/sweep_$lab.txt
  echo "== sweep $lab rc=$?"; grep -v "^\s*$" $OUT/sweep_$lab.txt | tail -40
}
sw q8 --types Q8_0 --rows-per-lane 1,2,4 --threads-per-row 0,32,128
sw q8_coalesced --types Q8_0 --rows-per-lane 1,2,4 --threads-per-row 0,32,128 --probe coalesced
sw q8_nodot --types Q8_0 --rows-per-lane 1,2,4 --threads-per-row 0 --probe nodot
sw q4 --types Q4_0 --rows-per-lane 1,4 --threads-per-row 0
wait $SP; cat $OUT/synth.log | tail -2
dec() {  # label model context extra...
  local lab=$1 m=$M/$2.gguf c=$3; shift 3
  timeout 90 $B/kvtrie-bench decode --model $m --context $c --sequences 1 --tokens 64 --read-bandwidth 2.84e12 "$@" \
    2>>$OUT/decode.err | sed "s/^{/{\"label\":\"$lab\",/" >> $OUT/decode.jsonl
  grep "\"label\":\"$lab\"" $OUT/decode.jsonl | python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["bench"]=="decode": print(r["label"], r["model"], r["context"], "tok/s", round(r["tok_s"],1), "step", round(r["step_ms"],3))
  elif r["bench"]=="decode_profile": print("   ", r["op"], r["dispatches"], round(r.get("ms",r.get("gpu_ms",0)),3), r.get("wall_ms",""))'
}
dec q8_512 8b-q8 512 --profile
dec q8_4096 8b-q8 4096 --profile
dec q4_4096 8b-q4 4096 --profile
dec q8_512b 8b-q8 512
timeout 120 $B/kvtrie-bench sweep-attention --model llama3-8b --contexts 512,4096 --sequences 1 --splits 128,256,512 \
  --variants decode,decode_probe1,decode_probe2,decode_probe5 --evict-mib 256 --merge-in-pass \
  > $OUT/sweep_attention.jsonl 2> $OUT/sweep_attention.txt
echo "== attention rc=$?"; grep -v "^\s*$" $OUT/sweep_attention.txt | tail -40
echo done

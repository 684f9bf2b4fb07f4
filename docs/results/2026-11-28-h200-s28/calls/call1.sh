#!/usr/bin/env bash
# Session 28, call 1. An H200: the table first (issue 16). Then how fast this card reads: read_probe with 1,
# 2, 4 and 8 loads a thread in flight (the logits product streamed 2.97 TB/s in session 27's profile where
# read_probe, one load a thread, said 2.76); each 8B decode product against both floors (sweep-matvec's
# read and read4); the step's registers (--shader-stats) and profile for 8B Q4_0 and Q8_0 at 512.
. bench/device_call_env.sh
table_on_h200 330
M=/tmp/m; mkdir -p $M
(timeout 150 $B/kvtrie-synth --preset llama3-8b --type Q8_0 --threads 8 -o $M/8b-q8.gguf;
 timeout 90 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 8 -o $M/8b-q4.gguf) > /tmp/synth.log 2>&1 &
SP=$!
timeout 60 $B/kvtrie-bench bandwidth --mib 2048 --unroll 1,2,4,8 > $OUT/bandwidth.jsonl 2>/tmp/bw.txt
echo "== bandwidth rc=$?"; python3 -c 'import json,sys
for l in open(sys.argv[1]):
  r=json.loads(l)
  if r["bench"]=="read_probe": print("  unroll", r["unroll"], "threads", r["threads"], round(r["read_bytes_per_s"]/1e12,3), "TB/s")
  else: print(l.strip())' $OUT/bandwidth.jsonl
sw() {  # label args...
  local lab=$1; shift
  timeout 100 $B/kvtrie-bench sweep-matvec --model llama3-8b --tokens 1 --variants q8i "$@" \
    >> $OUT/sweep.jsonl 2> /tmp/sweep_$lab.txt
  echo "== sweep $lab rc=$?"; grep -v "^\s*$" /tmp/sweep_$lab.txt | grep -v "^\[" | tail -30
}
sw q8 --types Q8_0 --rows-per-lane 1,4 --threads-per-row 0,64
sw q4 --types Q4_0 --rows-per-lane 1,4 --threads-per-row 0,64
wait $SP; tail -2 /tmp/synth.log
dec() {  # label model context extra...
  local lab=$1 m=$M/$2.gguf c=$3; shift 3
  timeout 90 $B/kvtrie-bench decode --model $m --context $c --sequences 1 --tokens 64 --read-bandwidth 2.84e12 "$@" \
    2>>/tmp/decode.err | sed "s/^{/{\"label\":\"$lab\",/" >> $OUT/decode.jsonl
  grep "\"label\":\"$lab\"" $OUT/decode.jsonl | python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["bench"]=="decode": print(r["label"], r["model"], r["context"], "tok/s", round(r["tok_s"],1), "step", round(r["step_ms"],3))
  elif r["bench"]=="decode_profile": print("   ", r["op"], r["dispatches"], round(r.get("ms",r.get("gpu_ms",0)),3), r.get("wall_ms",""))
  elif r["bench"]=="shader_stats" and r["stat"] in ("Register Count","Shared Memory Size"): print("    stats", r["pipeline"], r["spec"], r["stat"], r["value"])'
}
dec q4_512 8b-q4 512 --profile --shader-stats
dec q8_512 8b-q8 512 --profile --shader-stats
tail -3 /tmp/decode.err
echo done

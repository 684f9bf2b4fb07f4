#!/usr/bin/env bash
# Session 27, call 3. An H200: the table first (issue 16). Then Q8_0's SwiGLU product in 16 lanes of a row
# (new, $B) against 4 lanes of 4 rows (old, $B_OLD: 2e8aac8 with the probes), alternately: 8B Q8_0 at 512
# and 4096, 1B Q8_0 at 512, the profile of each at 512; then the decode pass's splits of 256 against the
# rule's 512 at 4096 and 6144 for 8B Q4_0, Q4_K, Q8_0 (new build), alternately.
. bench/device_call_env.sh
M=/tmp/m; mkdir -p $M
for p in "8b Q8_0" "1b Q8_0" "8b Q4_0" "8b Q4_K"; do set -- $p
  timeout 150 $B/kvtrie-synth --preset llama3-$1 --type $2 --threads 8 -o $M/$1-$2.gguf > /dev/null 2>&1; done &
SP=$!
if [[ "$GPU" == *H200* ]]; then
  PEER_DIR=$P STEPS="limits models" PRESETS="llama3-8b llama3-1b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
    MODELS_DIR=/tmp/models timeout 330 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
  echo "run_device rc=$?"; grep -v "^\s*$" /tmp/rd/summary.md | head -36
  tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
fi
wait $SP; ls $M
dec() {  # label bin model context extra...
  local lab=$1 bin=$2 m=$M/$3.gguf c=$4; shift 4
  timeout 90 $bin/kvtrie-bench decode --model $m --context $c --sequences 1 --tokens 64 --read-bandwidth 2.84e12 "$@" \
    2>>$OUT/decode.err | sed "s/^{/{\"label\":\"$lab\",/" >> $OUT/decode.jsonl
  grep "\"label\":\"$lab\"" $OUT/decode.jsonl | grep '"bench":"decode"' | tail -1 | python3 -c 'import json,sys
r=json.loads(sys.stdin.read()); print(r["label"], r["model"], r["context"], "tok/s", round(r["tok_s"],1))'
}
for i in 1 2 3; do
  dec q8_512_old $B_OLD 8b-Q8_0 512; dec q8_512_new $B 8b-Q8_0 512
  dec q8_4096_old $B_OLD 8b-Q8_0 4096; dec q8_4096_new $B 8b-Q8_0 4096
  dec 1bq8_512_old $B_OLD 1b-Q8_0 512; dec 1bq8_512_new $B 1b-Q8_0 512
done
dec q8_512_old_prof $B_OLD 8b-Q8_0 512 --profile; dec q8_512_new_prof $B 8b-Q8_0 512 --profile
python3 - $OUT/decode.jsonl <<'P'
import json,sys
for l in open(sys.argv[1]):
  r=json.loads(l)
  if r["bench"]=="decode_profile" and "matvec" in r["op"]: print("  ", r["label"], r["op"], r["dispatches"], round(r["ms"],3))
  if r["bench"]=="decode_profile" and r["op"]=="total": print("  ", r["label"], "total", r["gpu_ms"], r["wall_ms"])
P
for i in 1 2; do for m in 8b-Q4_0 8b-Q4_K 8b-Q8_0; do for c in 4096 6144; do
  dec ${m}_${c}_rule $B $m $c; dec ${m}_${c}_s256 $B $m $c --attention-split 256
done; done; done
echo done

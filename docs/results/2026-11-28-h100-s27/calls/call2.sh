#!/usr/bin/env bash
# Session 27, call 2. An H200: the table first (issue 16). Then 8B Q8_0's SwiGLU and residual products in
# every launch shape that writes its output quantized (16 rows a work group), with the coalesced probe and the
# nodot probe; the decode pass's split sizes at 1024-8192 (sweep); and the whole step at 4096 and 2048 with
# splits of 256 / 128 against the rule's (an 8th of the positions, 128 to 512), alternately.
. bench/device_call_env.sh
M=/tmp/m; mkdir -p $M
(timeout 150 $B/kvtrie-synth --preset llama3-8b --type Q8_0 --threads 8 -o $M/8b-q8.gguf;
 timeout 90 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 8 -o $M/8b-q4.gguf;
 timeout 60 $B/kvtrie-synth --preset llama3-1b --type Q4_0 --threads 8 -o $M/1b-q4.gguf) > /tmp/synth.log 2>&1 &
SP=$!
if [[ "$GPU" == *H200* ]]; then
  PEER_DIR=$P STEPS="limits models" PRESETS="llama3-8b llama3-1b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
    MODELS_DIR=/tmp/models timeout 330 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
  echo "run_device rc=$?"; grep -v "^\s*$" /tmp/rd/summary.md | head -36
  tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
fi
sw() {  # label args...
  local lab=$1; shift
  timeout 120 $B/kvtrie-bench sweep-matvec --model llama3-8b --tokens 1 --variants q8i --types Q8_0 "$@" 2>>$OUT/sweep.txt |
    sed "s/^{/{\"label\":\"$lab\",/" >> $OUT/sweep.jsonl
  echo "== sweep $lab rc=$?"
}
for probe in "" coalesced nodot; do
  for mode in norm_swiglu acc_qnorm; do
    sw "${probe:-real}_$mode" --mode $mode --rows-per-lane 1,2,4 --threads-per-row 32,64,128,256 \
      --workgroups 128,256,512,1024 ${probe:+--probe $probe}
  done
done
python3 - $OUT/sweep.jsonl <<'P'
import json,sys
rows=[json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
for lab in sorted(set(r['label'] for r in rows)):
  want = 'gate_up' if 'swiglu' in lab else None
  for shape in (['gate_up'] if want else ['o','down']):
    rs=[r for r in rows if r['label']==lab and r['shape']==shape and r['variant'].startswith('q8i')]
    def whole(v):
      p=v.split(); rpl=int(p[p.index('rows')+1]); tpr=int(p[p.index('tpr')+1]); wg=int(p[p.index('wg')+1])
      return wg//tpr*rpl % 16 == 0
    rs=[r for r in rs if whole(r['variant'])]
    rs.sort(key=lambda r:r['us'])
    rd=[r for r in rows if r['label']==lab and r['shape']==shape and r['variant']=='read']
    print(lab, shape, 'read', round(rd[0]['us'],2) if rd else '-', ' | '.join(f"{r['variant'].replace('q8i ','')}: {r['us']:.2f}" for r in rs[:6]))
P
timeout 150 $B/kvtrie-bench sweep-attention --model llama3-8b --contexts 1024,2048,4096,8192 --sequences 1 \
  --splits 128,256,512 --variants decode --evict-mib 256 --merge-in-pass > $OUT/sweep_attention.jsonl 2>>$OUT/sweep.txt
echo "== attention rc=$?"
python3 -c 'import json,sys
for l in open(sys.argv[1]):
  if l.startswith("{"):
    r=json.loads(l); print("attention", r["context"], r["split"], round(r["us"],2))' $OUT/sweep_attention.jsonl
wait $SP; tail -3 /tmp/synth.log
dec() {  # label model context extra...
  local lab=$1 m=$M/$2.gguf c=$3; shift 3
  timeout 90 $B/kvtrie-bench decode --model $m --context $c --sequences 1 --tokens 64 --read-bandwidth 2.84e12 "$@" \
    2>>$OUT/decode.err | sed "s/^{/{\"label\":\"$lab\",/" >> $OUT/decode.jsonl
  grep "\"label\":\"$lab\"" $OUT/decode.jsonl | tail -1 | python3 -c 'import json,sys
r=json.loads(sys.stdin.read()); print(r["label"], r["model"], r["context"], "tok/s", round(r["tok_s"],1))'
}
for i in 1 2; do
  dec q8_4096_rule 8b-q8 4096; dec q8_4096_s256 8b-q8 4096 --attention-split 256
  dec q4_4096_rule 8b-q4 4096; dec q4_4096_s256 8b-q4 4096 --attention-split 256
  dec q4_2048_rule 8b-q4 2048; dec q4_2048_s128 8b-q4 2048 --attention-split 128
  dec 1b_4096_rule 1b-q4 4096; dec 1b_4096_s256 1b-q4 4096 --attention-split 256
  dec q4_8192_rule 8b-q4 8192; dec q4_8192_s256 8b-q4 8192 --attention-split 256
done
echo done

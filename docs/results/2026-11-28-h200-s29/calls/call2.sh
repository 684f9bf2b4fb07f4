#!/usr/bin/env bash
# Session 29, call 2. The step's runtime knobs on the H200 (new build d2255ff): how much of the weights the L2
# prefetch beside attention takes (o + N MiB of gate/up, work groups), the attention split and key lanes;
# 8B Q4_0 at 512 and 4096, Q8_0, Q4_K and the 1B at 512, two rounds each; then old (a81228e) against new
# once more at 512.
. bench/device_call_env.sh
M=/tmp/m; mkdir -p $M
(for t in Q4_0 Q8_0 Q4_K; do timeout 120 $B/kvtrie-synth --preset llama3-8b --type $t --threads 8 -o $M/8b-$t.gguf; done
 timeout 60 $B/kvtrie-synth --preset llama3-1b --type Q4_0 --threads 8 -o $M/1b-Q4_0.gguf) > /tmp/synth.log 2>&1
tail -1 /tmp/synth.log
dec() {  # build label model context extra...
  local bin=$1 lab=$2 m=$M/$3.gguf c=$4; shift 4
  timeout 60 $bin/kvtrie-bench decode --model $m --context $c --tokens 64 --sequences 1 "$@" \
    2>/dev/null | grep -E '"decode' | sed "s/^{/{\"label\":\"$lab\",/" >> $OUT/decode.jsonl
}
pf() { echo --prefetch-o --prefetch-ffn-mib $1 --prefetch-groups ${2:-512}; }
for round in 1 2; do
  m=8b-Q4_0
  dec $B default $m 512
  dec $B none $m 512 --no-prefetch
  for mib in 8 24 32 48; do dec $B o+$mib $m 512 $(pf $mib); done
  dec $B o+16/g256 $m 512 $(pf 16 256)
  dec $B o+16/g1024 $m 512 $(pf 16 1024)
  dec $B o+32/g1024 $m 512 $(pf 32 1024)
  for s in 32 64 256; do dec $B split$s $m 512 --attention-split $s; done
  for kl in 1 4; do dec $B lanes$kl $m 512 --attention-key-lanes $kl; done
  dec $B default $m 4096
  dec $B o+32 $m 4096 $(pf 32)
  dec $B split256 $m 4096 --attention-split 256
  dec $B none $m 4096 --no-prefetch
  for m in 8b-Q8_0 8b-Q4_K 1b-Q4_0; do
    dec $B default $m 512
    dec $B o+16 $m 512 $(pf 16)
    dec $B o+32 $m 512 $(pf 32)
  done
  dec $B o+8 1b-Q4_0 512 $(pf 8)
  dec $B split64 1b-Q4_0 512 --attention-split 64
  dec $B_OLD old 8b-Q4_0 512; dec $B new 8b-Q4_0 512
  dec $B_OLD old 8b-Q4_K 512; dec $B new 8b-Q4_K 512
done
python3 - $OUT/decode.jsonl <<'PY'
import json, sys, collections
t = collections.OrderedDict()
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["bench"] == "decode":
        t.setdefault((r["model"], r["context"]), collections.OrderedDict()).setdefault(r["label"], []).append(round(r["tok_s"], 1))
for k, d in t.items():
    print(k)
    for lab, v in d.items(): print("   ", lab, v)
PY
echo done

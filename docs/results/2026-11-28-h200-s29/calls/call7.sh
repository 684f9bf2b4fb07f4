#!/usr/bin/env bash
# Session 29, call 7. The kept change alone (d9a2522: the staged epilogue inputs; the kernels of d2255ff)
# against session 28's build (a81228e), alternately, four rounds: 8B Q4_0 at 512 and 4096, Q4_K at 512.
. bench/device_call_env.sh
M=/tmp/m; mkdir -p $M
for t in Q4_0 Q4_K; do timeout 60 $B/kvtrie-synth --preset llama3-8b --type $t --threads 8 -o $M/8b-$t.gguf > /dev/null 2>&1; done
dec() {  # bin label model context
  timeout 60 $1/kvtrie-bench decode --model $M/$3.gguf --context $4 --sequences 1 --tokens 64 \
    2>/dev/null | grep '"decode"' | sed "s/^{/{\"label\":\"$2\",/" >> $OUT/decode.jsonl
}
for round in 1 2 3 4; do
  for mc in "8b-Q4_0 512" "8b-Q4_0 4096" "8b-Q4_K 512"; do
    if [ $((round % 2)) = 1 ]; then dec $B_OLD old $mc; dec $B new $mc; else dec $B new $mc; dec $B_OLD old $mc; fi
  done
done
python3 - $OUT/decode.jsonl <<'PY'
import json, sys, collections, statistics
t = collections.OrderedDict()
for l in open(sys.argv[1]):
    r = json.loads(l)
    t.setdefault((r["model"], r["context"]), collections.OrderedDict()).setdefault(r["label"], []).append(round(r["tok_s"], 1))
for k, d in t.items():
    print(k, "  ".join("%s %s (median %.1f)" % (lab, v, statistics.median(v)) for lab, v in d.items()))
PY
echo done

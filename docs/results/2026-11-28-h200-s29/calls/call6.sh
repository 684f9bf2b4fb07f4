#!/usr/bin/env bash
# Session 29, call 6. The final build a0b8ae8 (staged epilogue inputs, one token's Q/K/V in 16 lanes): the
# table (run_device.sh, the session-12 settings), --deterministic decode beside the default and old
# (a81228e) beside new, then every GPU test binary (run_device.sh's tests step).
. bench/device_call_env.sh
table_on_h200 300
cp /tmp/rd/side_by_side.jsonl /tmp/rd/summary.md /tmp/rd/results.jsonl $OUT/ 2>/dev/null
M=/tmp/m; mkdir -p $M
timeout 60 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 8 -o $M/8b-Q4_0.gguf > /dev/null 2>&1
dec() {  # bin label context extra...
  local bin=$1 lab=$2 c=$3; shift 3
  timeout 60 $bin/kvtrie-bench decode --model $M/8b-Q4_0.gguf --context $c --sequences 1 --tokens 64 "$@" \
    2>/dev/null | grep '"decode"' | sed "s/^{/{\"label\":\"$lab\",/" >> $OUT/decode.jsonl
}
for round in 1 2; do
  for c in 512 4096; do dec $B_OLD old $c; dec $B default $c; dec $B deterministic $c --deterministic; done
done
python3 - $OUT/decode.jsonl <<'PY'
import json, sys, collections
t = collections.OrderedDict()
for l in open(sys.argv[1]):
    r = json.loads(l)
    t.setdefault((r["model"], r["context"]), collections.OrderedDict()).setdefault(r["label"], []).append(round(r["tok_s"], 1))
for k, d in t.items(): print(k, "  ".join("%s %s" % (lab, v) for lab, v in d.items()))
PY
STEPS=tests timeout 235 bench/run_device.sh $B /tmp/rt > /tmp/rt.out 2>&1; echo "tests rc=$?"
grep -E "^\[|PASSED|FAILED|!!" /tmp/rt/bench.log | grep -vE "^\[ +(RUN|OK) " | tail -40
cp /tmp/rt/bench.log $OUT/gpu_tests.log
echo done

#!/usr/bin/env bash
# Session 29, call 3. The table on d2255ff (the staged epilogue inputs; run_device.sh with the session-12
# settings), --deterministic decode beside the default, and the GPU tests of the products, GpuModel and the
# engine.
. bench/device_call_env.sh
table_on_h200 320
cp /tmp/rd/side_by_side.jsonl /tmp/rd/summary.md /tmp/rd/results.jsonl $OUT/ 2>/dev/null
M=/tmp/m; mkdir -p $M
timeout 60 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 8 -o $M/8b-Q4_0.gguf > /dev/null 2>&1
dec() {  # label context extra...
  local lab=$1 c=$2; shift 2
  timeout 60 $B/kvtrie-bench decode --model $M/8b-Q4_0.gguf --context $c --sequences 1 --tokens 64 "$@" \
    2>/dev/null | grep '"decode"' | sed "s/^{/{\"label\":\"$lab\",/" >> $OUT/decode.jsonl
}
for round in 1 2; do
  for c in 512 4096; do dec default $c; dec deterministic $c --deterministic; done
done
python3 - $OUT/decode.jsonl <<'PY'
import json, sys, collections
t = collections.OrderedDict()
for l in open(sys.argv[1]):
    r = json.loads(l)
    t.setdefault((r["model"], r["context"]), collections.OrderedDict()).setdefault(r["label"], []).append(round(r["tok_s"], 1))
for k, d in t.items(): print(k, "  ".join("%s %s" % (lab, v) for lab, v in d.items()))
PY
for t in kernels_test_matvec_q8 kernels_test_matvec runner_test_gpu_model runner_test_gpu_engine; do
  timeout 150 $B/$t --gtest_brief=1 > /tmp/$t.log 2>&1; echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' /tmp/$t.log | tr '\n' ' ')"
  cat /tmp/$t.log >> $OUT/gpu_tests.log
done
echo done

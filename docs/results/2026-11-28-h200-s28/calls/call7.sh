#!/usr/bin/env bash
# Session 28, call 7. The final build (5e87117): the table (run_device.sh, the session-12 settings) on whatever
# card comes; the GPU tests of the products, GpuModel and the engine; 8 and 32 sequences old (3022c3d)
# against new alternately (the batches' residual shape changed after call 6); --deterministic decode.
. bench/device_call_env.sh
PEER_DIR=$P STEPS="limits models" PRESETS="llama3-8b llama3-1b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
  MODELS_DIR=/tmp/models timeout 330 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
echo "run_device rc=$?"; grep -v "^\s*$" /tmp/rd/summary.md | head -40
tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
for t in kernels_test_matvec_q8 runner_test_gpu_model runner_test_gpu_engine; do
  timeout 150 $B/$t --gtest_brief=1 > /tmp/$t.log 2>&1; echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' /tmp/$t.log | tr '\n' ' ')"
  cat /tmp/$t.log >> $OUT/gpu_tests.log
done
M=/tmp/m; mkdir -p $M
timeout 60 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 8 -o $M/8b-Q4_0.gguf > /dev/null 2>&1
dec() {  # build label model context sequences tokens [extra]
  local bin=$1 lab=$2 m=$M/$3.gguf c=$4 s=$5 n=$6; shift 6
  timeout 60 $bin/kvtrie-bench decode --model $m --context $c --sequences $s --tokens $n "$@" \
    2>/dev/null | grep '"decode"' | sed "s/^{/{\"label\":\"$lab\",/" >> $OUT/decode.jsonl
}
for round in 1 2; do
  for s in 8 32; do dec $B_OLD old 8b-Q4_0 512 $s 16; dec $B new 8b-Q4_0 512 $s 16; done
  for c in 512 4096; do dec $B new 8b-Q4_0 $c 1 64; dec $B new-det 8b-Q4_0 $c 1 64 --deterministic; done
done
python3 - $OUT/decode.jsonl <<'PY'
import json, sys, collections
t = collections.OrderedDict()
for l in open(sys.argv[1]):
    r = json.loads(l)
    t.setdefault((r["model"], r["context"], r["sequences"]), collections.OrderedDict()).setdefault(r["label"], []).append(round(r["tok_s"], 1))
for k, d in t.items():
    print(k, "  ".join("%s %s" % (lab, v) for lab, v in d.items()))
PY
echo done

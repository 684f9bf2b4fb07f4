#!/usr/bin/env bash
# Session 28, call 6. The residual products' two-subgroup lanes in batches: call 5's 8-token sweep had the
# quantized-output build (4 lanes of 4 rows, 256 invocations) slower than one subgroup a lane for Q4_0, and
# its decode rows of 8 and 32 sequences did not run (a repeated --tokens). Now: sweep-matvec at 8 and 4
# tokens over more shapes of two-subgroup lanes (rows 1, 2, 4 a lane); decode of 8 and 32 sequences old
# (3022c3d) against new (a4867c3), alternately; and every GPU test binary on the new build.
. bench/device_call_env.sh
M=/tmp/m; mkdir -p $M
(timeout 120 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 8 -o $M/8b-Q4_0.gguf;
 timeout 120 $B/kvtrie-synth --preset llama3-8b --type Q8_0 --threads 8 -o $M/8b-Q8_0.gguf) > /tmp/synth.log 2>&1 &
SP=$!
sw() {  # label args...
  local lab=$1; shift
  timeout 120 $B/kvtrie-bench sweep-matvec --model llama3-8b --variants q8i "$@" \
    2>/dev/null | sed "s/^{/{\"label\":\"$lab\",/" >> $OUT/sweep.jsonl
}
sw od8q --types Q4_0,Q8_0 --tokens 8 --shapes o,down --mode acc_qnorm --rows-per-lane 1,2,4 --workgroups 128,256,512,1024 --threads-per-row 32,64
python3 - $OUT/sweep.jsonl <<'PY'
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = collections.OrderedDict()
for r in rows:
    by.setdefault((r["label"], r["type"], r["shape"], r["tokens"]), []).append(r)
for key, rs in by.items():
    print(key, "  ".join("%s %.2f" % (r["variant"].replace("q8i ", ""), r["us"]) for r in rs if r["variant"] != "legacy"))
PY
wait $SP; tail -1 /tmp/synth.log
dec() {  # build label model context sequences tokens
  timeout 60 $1/kvtrie-bench decode --model $M/$3.gguf --context $4 --sequences $5 --tokens $6 \
    2>/dev/null | grep '"decode' | sed "s/^{/{\"label\":\"$2\",/" >> $OUT/decode.jsonl
}
for round in 1 2; do
  for m in 8b-Q4_0 8b-Q8_0; do
    for s in 8 32; do dec $B_OLD old $m 512 $s 16; dec $B new $m 512 $s 16; done
  done
done
python3 - $OUT/decode.jsonl <<'PY'
import json, sys, collections
t = collections.OrderedDict()
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["bench"] == "decode":
        t.setdefault((r["model"], r["context"], r["sequences"]), collections.OrderedDict()).setdefault(r["label"], []).append(round(r["tok_s"], 1))
for k, d in t.items():
    print(k, "  ".join("%s %s" % (lab, v) for lab, v in d.items()))
PY
STEPS=tests timeout 330 bench/run_device.sh $B /tmp/rt > /tmp/rt.out 2>&1
echo "tests rc=$?"; grep -E "^\[ +(PASSED|FAILED)|FAILED|rc=" /tmp/rt/bench.log | head -40
cp /tmp/rt/bench.log $OUT/gpu_tests.log
echo done

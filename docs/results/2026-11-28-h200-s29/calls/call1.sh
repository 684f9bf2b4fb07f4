#!/usr/bin/env bash
# Session 29, call 1. The products' epilogue inputs (y, the next norm's weight) staged in shared memory in
# the first round and the norm's sum-of-squares loads 8 at a time (new) against a81228e (old): sweep-matvec
# of the engine's decode shapes on both builds, and the new build's probe without those reads (noinput: the
# most staging could give); then the step, old against new, alternately; then the matvec_q8 tests.
. bench/device_call_env.sh
M=/tmp/m; mkdir -p $M
(for t in Q4_0 Q8_0 Q4_K; do timeout 120 $B/kvtrie-synth --preset llama3-8b --type $t --threads 8 -o $M/8b-$t.gguf; done
 timeout 60 $B/kvtrie-synth --preset llama3-1b --type Q4_0 --threads 8 -o $M/1b-Q4_0.gguf) > /tmp/synth.log 2>&1 &
SP=$!
sw() {  # bin label args...
  local bin=$1 lab=$2; shift 2
  timeout 100 $bin/kvtrie-bench sweep-matvec --model llama3-8b --variants q8i --types Q4_0,Q8_0,Q4_K --tokens 1 "$@" \
    2>/dev/null | sed "s/^{/{\"label\":\"$lab\",/" >> $OUT/sweep.jsonl
}
for round in 1 2; do
  for v in old new noinput; do
    bin=$B; pr=""; [ $v = old ] && bin=$B_OLD; [ $v = noinput ] && pr="--probe noinput"
    sw $bin $v --shapes qkv --rows-per-lane 1 --workgroups 128 --threads-per-row 32 $pr
    sw $bin $v --shapes gate_up --rows-per-lane 1 --workgroups 512 --threads-per-row 32 $pr
    sw $bin $v --shapes o,down --mode acc_qnorm --rows-per-lane 1 --workgroups 1024 --threads-per-row 64 $pr
  done
done
python3 - $OUT/sweep.jsonl <<'PY'
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = collections.OrderedDict()
for r in rows:
    if r["variant"] == "legacy": continue
    lab = "read" if r["variant"] == "read" else r["label"]
    if r["variant"] == "read4": lab = "read4"
    by.setdefault((r["type"], r["shape"]), collections.OrderedDict()).setdefault(lab, []).append(r["us"])
for key, d in by.items():
    print(key, "  ".join("%s %s" % (k, "/".join("%.2f" % x for x in v)) for k, v in d.items()))
PY
wait $SP; tail -1 /tmp/synth.log
dec() {  # build label model context extra...
  local bin=$1 lab=$2 m=$M/$3.gguf c=$4; shift 4
  timeout 60 $bin/kvtrie-bench decode --model $m --context $c --tokens 64 "$@" \
    2>/dev/null | grep -E '"(decode|shader_stats)' | sed "s/^{/{\"label\":\"$lab\",/" >> $OUT/decode.jsonl
}
for round in 1 2 3; do
  for m in 8b-Q4_0 8b-Q8_0 8b-Q4_K 1b-Q4_0; do
    for c in 512 4096; do
      [ $m != 8b-Q4_0 ] && [ $c = 4096 ] && continue
      dec $B_OLD old $m $c --sequences 1; dec $B new $m $c --sequences 1
    done
  done
done
dec $B_OLD old 8b-Q4_0 512 --sequences 8 --tokens 16; dec $B new 8b-Q4_0 512 --sequences 8 --tokens 16
dec $B new-profile 8b-Q4_0 512 --sequences 1 --profile --shader-stats
python3 - $OUT/decode.jsonl <<'PY'
import json, sys, collections
t = collections.OrderedDict()
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["bench"] == "decode":
        t.setdefault((r["model"], r["context"], r["sequences"]), collections.OrderedDict()).setdefault(r["label"], []).append(round(r["tok_s"], 1))
    elif r["bench"] == "decode_profile":
        print(r["label"], r["op"], r["dispatches"], round(r.get("ms", r.get("gpu_ms", 0)), 3), r.get("wall_ms", ""))
for k, d in t.items():
    print(k, "  ".join("%s %s" % (lab, v) for lab, v in d.items()))
PY
grep shader_stats $OUT/decode.jsonl | grep -E 'matvec_q8i_(acc_qnorm|norm_swiglu_qout|norm_qkv)_q4_0x8' | grep -i regist | cut -c1-400
for t in kernels_test_matvec_q8; do
  timeout 150 $B/$t --gtest_brief=1 > /tmp/$t.log 2>&1; echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' /tmp/$t.log | tr '\n' ' ')"
  cat /tmp/$t.log >> $OUT/gpu_tests.log
done
echo done

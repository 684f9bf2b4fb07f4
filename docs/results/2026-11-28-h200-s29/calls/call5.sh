#!/usr/bin/env bash
# Session 29, call 5. Four builds in the step, alternately: a81228e (old: session 28), d2255ff (mid: the
# staged epilogue inputs), 2b4784e (qkv: + one token's Q/K/V in 16 lanes of a row), 402b523 (new: + Q4_0's
# high nibbles dotted in place); sweep-matvec of the engine's Q4_0 shapes, mid against new; a profile; the
# GPU tests of the products, GpuModel and the engine on new.
. bench/device_call_env.sh
for n in mid qkv; do mkdir -p /tmp/w-$n; tar -C /tmp/w-$n -xJf .device/$n.tar.xz; done
B_MID=/tmp/w-mid/BIN; B_QKV=/tmp/w-qkv/BIN
echo "mid $(cat $B_MID/COMMIT) qkv $(cat $B_QKV/COMMIT)"
M=/tmp/m; mkdir -p $M
(for t in Q4_0 Q8_0 Q4_K; do timeout 120 $B/kvtrie-synth --preset llama3-8b --type $t --threads 8 -o $M/8b-$t.gguf; done
 timeout 60 $B/kvtrie-synth --preset llama3-1b --type Q4_0 --threads 8 -o $M/1b-Q4_0.gguf) > /tmp/synth.log 2>&1 &
SP=$!
sw() {  # bin label types args...
  local bin=$1 lab=$2 ty=$3; shift 3
  timeout 100 $bin/kvtrie-bench sweep-matvec --model llama3-8b --variants q8i --types $ty --tokens 1 "$@" \
    2>/dev/null | sed "s/^{/{\"label\":\"$lab\",/" >> $OUT/sweep.jsonl
}
for round in 1 2; do
  for v in mid new; do
    bin=$B; [ $v = mid ] && bin=$B_MID
    sw $bin $v Q4_0,Q4_K,Q8_0 --shapes qkv --rows-per-lane 1 --workgroups 128,512 --threads-per-row 32
    sw $bin $v Q4_0 --shapes gate_up --rows-per-lane 1 --workgroups 512 --threads-per-row 32
    sw $bin $v Q4_0 --shapes o,down --mode acc_qnorm --rows-per-lane 1 --workgroups 1024 --threads-per-row 64
  done
done
python3 - $OUT/sweep.jsonl <<'PY'
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = collections.OrderedDict()
for r in rows:
    if r["variant"] in ("legacy", "read4"): continue
    lab = "read" if r["variant"] == "read" else r["label"] + " " + r["variant"].replace("q8i ", "")
    by.setdefault((r["type"], r["shape"]), collections.OrderedDict()).setdefault(lab, []).append(r["us"])
for key, d in by.items():
    print(key, "  |  ".join("%s %s" % (k, "/".join("%.2f" % x for x in v)) for k, v in d.items()))
PY
wait $SP; tail -1 /tmp/synth.log
dec() {  # build label model context extra...
  local bin=$1 lab=$2 m=$M/$3.gguf c=$4; shift 4
  timeout 60 $bin/kvtrie-bench decode --model $m --context $c --tokens 64 --sequences 1 "$@" \
    2>/dev/null | grep -E '"(decode|shader_stats)' | sed "s/^{/{\"label\":\"$lab\",/" >> $OUT/decode.jsonl
}
four() { dec $B_OLD old "$@"; dec $B_MID mid "$@"; dec $B_QKV qkv "$@"; dec $B new "$@"; }
for round in 1 2 3; do four 8b-Q4_0 512; done
for round in 1 2; do four 8b-Q4_0 4096; four 8b-Q4_K 512; four 8b-Q8_0 512; four 1b-Q4_0 512; done
dec $B new-profile 8b-Q4_0 512 --profile --shader-stats
python3 - $OUT/decode.jsonl <<'PY'
import json, sys, collections
t = collections.OrderedDict()
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["bench"] == "decode":
        t.setdefault((r["model"], r["context"]), collections.OrderedDict()).setdefault(r["label"], []).append(round(r["tok_s"], 1))
    elif r["bench"] == "decode_profile":
        print(r["label"], r["op"], r["dispatches"], round(r.get("ms", r.get("gpu_ms", 0)), 3), r.get("wall_ms", ""))
for k, d in t.items(): print(k, "  ".join("%s %s" % (lab, v) for lab, v in d.items()))
PY
grep shader_stats $OUT/decode.jsonl | grep -E 'matvec_q8i_(acc_qnorm|norm_swiglu_qout|norm_qkv)_q4_0x8' | grep -i regist | sed 's/.*pipeline":"//' | cut -c1-120
for t in kernels_test_matvec_q8 runner_test_gpu_model runner_test_gpu_engine; do
  timeout 150 $B/$t --gtest_brief=1 > /tmp/$t.log 2>&1; echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' /tmp/$t.log | tr '\n' ' ')"
  cat /tmp/$t.log >> $OUT/gpu_tests.log
done
echo done

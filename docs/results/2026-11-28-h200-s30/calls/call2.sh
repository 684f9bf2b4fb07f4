#!/usr/bin/env bash
# Session 30, call 2: the products chained by in-shader hand-offs instead of barriers (sweep-matvec
# --handoff) against the same chained with barriers and with none (--independent), Q4_0 and Q8_0 in the
# engine's one-token shapes; then the matvec_q8 tests (the hand-off chain runs without barriers here).
. bench/device_call_env.sh
for round in 1 2; do
  for mode in "" --handoff --independent; do
    lab=${mode#--}; lab=${lab:-barriers}
    sw $B $lab --types Q4_0,Q8_0 --shapes qkv --rows-per-lane 1 --workgroups 128 --threads-per-row 32 $mode
    sw $B $lab --types Q4_0,Q8_0 --shapes gate_up --rows-per-lane 1 --workgroups 512 --threads-per-row 32 $mode
    sw $B $lab --types Q4_0,Q8_0 --shapes o,down --mode acc_qnorm --rows-per-lane 1 --workgroups 1024 --threads-per-row 64 $mode
  done
done
python3 - $OUT/sweep.jsonl <<'PY'
import collections, json, sys
by = collections.OrderedDict()
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    r = json.loads(l)
    if r["variant"] == "legacy" or r["variant"] == "read4": continue
    lab = ("read " if r["variant"] == "read" else "") + r["label"]
    by.setdefault((r["type"], r["shape"]), collections.OrderedDict()).setdefault(lab, []).append(r["us"])
for key, d in by.items():
    print(key, "  ".join("%s %s" % (k, "/".join("%.2f" % x for x in v)) for k, v in d.items()))
PY
grep -h handoff $OUT/sweep.jsonl | head -2 | cut -c1-300
timeout 200 $B/kernels_test_matvec_q8 --gtest_brief=1 > $OUT/matvec_q8.log 2>&1; echo "matvec_q8 rc=$?"
grep -E "^\[  (PASSED|FAILED)|Failure|differs|gave" $OUT/matvec_q8.log | head -20
echo done

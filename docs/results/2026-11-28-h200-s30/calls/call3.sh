#!/usr/bin/env bash
# Session 30, call 3: why the hand-off chain ran slower than barriers (call 2). Q4_0's one-token products
# chained with barriers; by hand-offs; by hand-offs keeping the barriers (the hand-off builds' own cost:
# x staged, coherent bindings, the end-of-group fence and count); by hand-offs whose polls are spaced
# (backoff64: contention on the counter).
. bench/device_call_env.sh
for round in 1 2; do
  for mode in "" "--handoff" "--handoff --handoff-barriers" "--handoff --probe backoff64"; do
    lab=$(echo "${mode:-barriers}" | tr -d '-' | tr ' ' '_')
    sw $B $lab --types Q4_0 --shapes qkv --rows-per-lane 1 --workgroups 128 --threads-per-row 32 $mode
    sw $B $lab --types Q4_0 --shapes gate_up --rows-per-lane 1 --workgroups 512 --threads-per-row 32 $mode
    sw $B $lab --types Q4_0 --shapes o,down --mode acc_qnorm --rows-per-lane 1 --workgroups 1024 --threads-per-row 64 $mode
  done
done
python3 - $OUT/sweep.jsonl <<'PY'
import collections, json, sys
by = collections.OrderedDict()
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    r = json.loads(l)
    if not r["variant"].startswith("q8i"): continue
    by.setdefault((r["type"], r["shape"]), collections.OrderedDict()).setdefault(r["label"], []).append(r["us"])
for key, d in by.items():
    print(key, "  ".join("%s %s" % (k, "/".join("%.2f" % x for x in v)) for k, v in d.items()))
PY
echo done

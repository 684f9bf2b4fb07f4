#!/usr/bin/env bash
# Session 30, call 4: where the hand-off build's own cost comes from (call 3: 3-10 us above the plain build
# with the barriers kept). Q4_0's one-token products, each hand-off build (as built; probes: the first round
# loaded after the wait, x read a unit at a time instead of staged, no fence before the count, spaced polls)
# with the barriers kept and without; the plain build with barriers; registers of every pipeline.
. bench/device_call_env.sh
for mode in "" "--handoff-barriers"; do
  for pr in none nopreload nostage nofence backoff64; do
    p=""; [ $pr != none ] && p="--probe $pr"
    lab=$pr${mode:+_kept}
    sw $B $lab --types Q4_0 --shapes qkv --rows-per-lane 1 --workgroups 128 --threads-per-row 32 --handoff $mode $p
    sw $B $lab --types Q4_0 --shapes gate_up --rows-per-lane 1 --workgroups 512 --threads-per-row 32 --handoff $mode $p
    sw $B $lab --types Q4_0 --shapes o,down --mode acc_qnorm --rows-per-lane 1 --workgroups 1024 --threads-per-row 64 --handoff $mode $p
  done
done
for round in 1 2; do
  sw $B barriers --types Q4_0 --shapes qkv --rows-per-lane 1 --workgroups 128 --threads-per-row 32
  sw $B barriers --types Q4_0 --shapes gate_up --rows-per-lane 1 --workgroups 512 --threads-per-row 32
  sw $B barriers --types Q4_0 --shapes o,down --mode acc_qnorm --rows-per-lane 1 --workgroups 1024 --threads-per-row 64
done
sw $B stats --types Q4_0 --shapes o --mode acc_qnorm --rows-per-lane 1 --workgroups 1024 --threads-per-row 64 --handoff --shader-stats --repeats 1 --warmup 0
sw $B stats --types Q4_0 --shapes qkv --rows-per-lane 1 --workgroups 128 --threads-per-row 32 --handoff --shader-stats --repeats 1 --warmup 0
sw $B stats --types Q4_0 --shapes gate_up --rows-per-lane 1 --workgroups 512 --threads-per-row 32 --handoff --shader-stats --repeats 1 --warmup 0
python3 - $OUT/sweep.jsonl <<'PY'
import collections, json, sys
by = collections.OrderedDict()
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    r = json.loads(l)
    if r["bench"] == "shader_stats":
        if r.get("stat") in ("Register Count", "Shared Memory Size") and "q4_0" in r.get("pipeline", ""):
            print(r["pipeline"], r["spec"], r["stat"], r["value"])
        continue
    if not r["variant"].startswith("q8i") or r["label"] == "stats": continue
    by.setdefault((r["type"], r["shape"]), collections.OrderedDict()).setdefault(r["label"], []).append(r["us"])
for key, d in by.items():
    print(key, "  ".join("%s %s" % (k, "/".join("%.2f" % x for x in v)) for k, v in d.items()))
PY
echo done

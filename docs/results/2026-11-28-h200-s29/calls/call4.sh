#!/usr/bin/env bash
# Session 29, call 4. Launch shapes that give a thread more rows while the thread count a product stays
# (rows per lane x 2, threads per lane x 2): more weight bytes in flight a thread for the same registers of
# x, on d2255ff. sweep-matvec, one token, the engine's shape among them; two rounds.
. bench/device_call_env.sh
sw() {  # label args...
  local lab=$1; shift
  timeout 100 $B/kvtrie-bench sweep-matvec --model llama3-8b --variants q8i --types Q4_0,Q8_0,Q4_K --tokens 1 "$@" \
    2>/dev/null | sed "s/^{/{\"label\":\"$lab\",/" >> $OUT/sweep.jsonl
}
for round in 1 2; do
  sw od --shapes o,down --mode acc_qnorm --rows-per-lane 1,2,4 --threads-per-row 64,128,256 --workgroups 512,1024
  sw gu --shapes gate_up --rows-per-lane 1,2,4 --threads-per-row 32,64,128 --workgroups 256,512,1024
  sw qkv --shapes qkv --rows-per-lane 1,2,4 --threads-per-row 32,64,128 --workgroups 128,256,512
done
python3 - $OUT/sweep.jsonl <<'PY'
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = collections.OrderedDict()
for r in rows:
    if r["variant"] == "legacy": continue
    by.setdefault((r["type"], r["shape"]), collections.OrderedDict()).setdefault(r["variant"].replace("q8i ", ""), []).append(r["us"])
for key, d in by.items():
    print(key)
    items = sorted(d.items(), key=lambda kv: min(kv[1]))
    for k, v in items[:12]: print("   %-28s %s" % (k, " / ".join("%.2f" % x for x in v)))
PY
echo done

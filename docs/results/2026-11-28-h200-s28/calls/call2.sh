#!/usr/bin/env bash
# Session 28, call 2. Why Q4_0's decode products run 18-35% above their read floors where Q8_0's run at
# theirs (call 1, H200): each subgroup's x loads touch twice the cache lines they need (a unit's two groups
# are 32 bytes apart, so each load of 16 bytes a thread spans 1 KB), about 31 L1 wavefronts for 576 bytes of
# Q4_0 weights. sweep-matvec over the engine's folds and launch shapes, with the products as built, without
# their arithmetic (nodot) and with each subgroup's x loads as contiguous runs (xcontig, wrong values);
# Q4_0 first, then Q8_0. On an H200 also --deterministic decode beside the default (issue 16's last row).
. bench/device_call_env.sh
M=/tmp/m; mkdir -p $M
if [[ "$GPU" == *H200* ]]; then
  (timeout 90 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 8 -o $M/8b-q4.gguf) > /tmp/synth.log 2>&1 &
  SP=$!
fi
sw() {  # label args...
  local lab=$1; shift
  timeout 120 $B/kvtrie-bench sweep-matvec --model llama3-8b --tokens 1 --variants q8i "$@" \
    2>/dev/null | sed "s/^{/{\"label\":\"$lab\",/" >> $OUT/sweep.jsonl
  echo "== sweep $lab rc=$?"
}
for T in Q4_0 Q8_0; do
  for probe in "" nodot xcontig; do
    P_ARG=(); [ -n "$probe" ] && P_ARG=(--probe $probe)
    sw "$T-od-$probe" --types $T --shapes o,down --mode acc_qnorm --rows-per-lane 1,2 --workgroups 256,512,1024 \
      --threads-per-row 0,64 "${P_ARG[@]}"
    sw "$T-gu-$probe" --types $T --shapes gate_up --rows-per-lane 1,2 --workgroups 256,512,1024 \
      --threads-per-row 0,64 "${P_ARG[@]}"
    sw "$T-qkv-$probe" --types $T --shapes qkv --rows-per-lane 1,2,4 --workgroups 128,256,512 "${P_ARG[@]}"
  done
done
python3 - $OUT/sweep.jsonl <<'PY'
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
best = collections.OrderedDict()
for r in rows:
    key = (r["type"], r["shape"])
    v = r["variant"]
    if v in ("read", "read4", "legacy"):
        best.setdefault(key, {}).setdefault(v, r["us"])
        continue
    parts = v.split()
    probe = parts[1] if parts[1] not in ("rows",) else "-"
    shape = " ".join(parts[-6:])
    best.setdefault(key, {})[(probe, shape)] = r["us"]
for key, d in best.items():
    print(key, "read %.2f read4 %.2f" % (d.get("read", 0), d.get("read4", 0)))
    shapes = sorted({k[1] for k in d if isinstance(k, tuple)})
    for s in shapes:
        print("   %-22s" % s, "  ".join("%s %6.2f" % (p, d[(p, s)]) for p in ("-", "nodot", "xcontig") if (p, s) in d))
PY
if [[ "$GPU" == *H200* ]]; then
  wait $SP
  for c in 512 4096; do
    for det in "" --deterministic "" --deterministic; do
      timeout 60 $B/kvtrie-bench decode --model $M/8b-q4.gguf --context $c --sequences 1 --tokens 64 $det \
        2>/dev/null | grep '"decode"' >> $OUT/deterministic.jsonl
    done
  done
  python3 -c 'import json,sys
for l in open(sys.argv[1]): r=json.loads(l); print("decode", r["context"], "deterministic", r["deterministic"], round(r["tok_s"],1))' $OUT/deterministic.jsonl
fi
echo done

#!/usr/bin/env bash
# Session 28, call 4. matvec_q8's two units a round, rebuilt as a second loop (1ba07a6: call 3's build kept
# the round's units in arrays and slowed every product, one unit a round included): sweep-matvec with 1 and
# 2 units ahead over the engine's shapes (the one-unit rows must match call 2's build), then the step, old
# (3022c3d) against new (1ba07a6: 2 units a round in one token's down projection only), alternately.
. bench/device_call_env.sh
M=/tmp/m; mkdir -p $M
(for t in Q4_0 Q8_0 Q4_K; do timeout 120 $B/kvtrie-synth --preset llama3-8b --type $t --threads 8 -o $M/8b-$t.gguf; done
 timeout 60 $B/kvtrie-synth --preset llama3-1b --type Q4_0 --threads 8 -o $M/1b-Q4_0.gguf) > /tmp/synth.log 2>&1 &
SP=$!
sw() {  # label args...
  local lab=$1; shift
  timeout 120 $B/kvtrie-bench sweep-matvec --model llama3-8b --tokens 1 --variants q8i "$@" \
    2>/dev/null | sed "s/^{/{\"label\":\"$lab\",/" >> $OUT/sweep.jsonl
  echo "== sweep $lab rc=$?"
}
for T in Q4_0 Q8_0 Q4_K; do
  sw "$T-od" --types $T --shapes o,down --mode acc_qnorm --rows-per-lane 1 --workgroups 512,1024 \
    --threads-per-row 0,64 --units-ahead 1,2
  sw "$T-gu" --types $T --shapes gate_up --rows-per-lane 1,4 --workgroups 128,512 --units-ahead 1,2
  sw "$T-qkv" --types $T --shapes qkv --rows-per-lane 1 --workgroups 128 --units-ahead 1,2
done
python3 - $OUT/sweep.jsonl <<'PY'
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = collections.OrderedDict()
for r in rows:
    by.setdefault((r["type"], r["shape"]), []).append(r)
for key, rs in by.items():
    fl = {r["variant"]: r["us"] for r in rs if r["variant"] in ("read", "read4")}
    print(key, "read %.2f read4 %.2f" % (fl.get("read", 0), fl.get("read4", 0)))
    shapes = collections.OrderedDict()
    for r in rs:
        v = r["variant"].split()
        if v[0] != "q8i": continue
        shapes.setdefault(" ".join(v[1:7]), []).append("ahead %s %6.2f" % (v[8], r["us"]))
    for s, l in shapes.items():
        print("   %-22s" % s, "  ".join(l))
PY
wait $SP; tail -1 /tmp/synth.log
dec() {  # build label model context extra...
  local bin=$1 lab=$2 m=$M/$3.gguf c=$4; shift 4
  timeout 60 $bin/kvtrie-bench decode --model $m --context $c --sequences 1 --tokens 64 "$@" \
    2>/dev/null | grep '"decode' | sed "s/^{/{\"label\":\"$lab\",/" >> $OUT/decode.jsonl
}
for round in 1 2 3; do
  for m in 8b-Q4_0 8b-Q8_0 8b-Q4_K 1b-Q4_0; do
    for c in 512 4096; do
      [ $m = 1b-Q4_0 ] && [ $c = 4096 ] && continue
      dec $B_OLD old $m $c; dec $B new $m $c
    done
  done
done
dec $B new-profile 8b-Q4_0 512 --profile
dec $B_OLD old-profile 8b-Q4_0 512 --profile
python3 - $OUT/decode.jsonl <<'PY'
import json, sys, collections
t = collections.OrderedDict()
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["bench"] == "decode":
        t.setdefault((r["model"], r["context"]), collections.OrderedDict()).setdefault(r["label"], []).append(round(r["tok_s"], 1))
    elif r["bench"] == "decode_profile":
        print(r["label"], r["op"], r["dispatches"], round(r.get("ms", r.get("gpu_ms", 0)), 3), r.get("wall_ms", ""))
for k, d in t.items():
    print(k, "  ".join("%s %s" % (lab, v) for lab, v in d.items()))
PY
echo done

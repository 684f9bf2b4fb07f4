#!/usr/bin/env bash
# Session 28, call 5. The residual products (o, down) in row lanes of two subgroups, for every token count
# (a4867c3: t1l16w, t8w): sweep-matvec one token and 8 tokens, with one subgroup beside (and Q/K/V's and
# gate/up's shapes with two, for what else it could take); then the step, old (3022c3d) against new,
# alternately, one sequence at 512 and 4096, 8 and 32 sequences, --deterministic; then the GPU tests of the
# products, GpuModel and the engine on the new build.
. bench/device_call_env.sh
M=/tmp/m; mkdir -p $M
(for t in Q4_0 Q8_0 Q4_K; do timeout 120 $B/kvtrie-synth --preset llama3-8b --type $t --threads 8 -o $M/8b-$t.gguf; done
 timeout 60 $B/kvtrie-synth --preset llama3-1b --type Q4_0 --threads 8 -o $M/1b-Q4_0.gguf) > /tmp/synth.log 2>&1 &
SP=$!
sw() {  # label args...
  local lab=$1; shift
  timeout 120 $B/kvtrie-bench sweep-matvec --model llama3-8b --variants q8i "$@" \
    2>/dev/null | sed "s/^{/{\"label\":\"$lab\",/" >> $OUT/sweep.jsonl
}
sw od1 --types Q4_0,Q8_0,Q4_K --tokens 1 --shapes o,down --mode acc_qnorm --rows-per-lane 1 --workgroups 512,1024 --threads-per-row 32,64
sw od8 --types Q4_0,Q8_0 --tokens 8 --shapes o,down --mode acc_qnorm --rows-per-lane 4 --workgroups 128,256 --threads-per-row 32,64
sw odacc8 --types Q4_0 --tokens 8 --shapes o,down --mode acc --rows-per-lane 2 --workgroups 128 --threads-per-row 32,64
sw qkv1 --types Q4_0,Q8_0,Q4_K --tokens 1 --shapes qkv --rows-per-lane 1 --workgroups 128,256 --threads-per-row 32,64
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
dec() {  # build label model context extra...
  local bin=$1 lab=$2 m=$M/$3.gguf c=$4; shift 4
  timeout 60 $bin/kvtrie-bench decode --model $m --context $c --tokens 64 "$@" \
    2>/dev/null | grep '"decode' | sed "s/^{/{\"label\":\"$lab\",/" >> $OUT/decode.jsonl
}
for round in 1 2 3; do
  for m in 8b-Q4_0 8b-Q8_0 8b-Q4_K 1b-Q4_0; do
    for c in 512 4096; do
      [ $m = 1b-Q4_0 ] && [ $c = 4096 ] && continue
      dec $B_OLD old $m $c --sequences 1; dec $B new $m $c --sequences 1
    done
  done
done
for round in 1 2; do
  for s in 8 32; do dec $B_OLD old 8b-Q4_0 512 --sequences $s --tokens 16; dec $B new 8b-Q4_0 512 --sequences $s --tokens 16; done
  for c in 512 4096; do dec $B new-det 8b-Q4_0 $c --sequences 1 --deterministic; done
done
dec $B new-profile 8b-Q4_0 512 --sequences 1 --profile
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
for t in kernels_test_matvec_q8 runner_test_gpu_model runner_test_gpu_engine; do
  timeout 150 $B/$t --gtest_brief=1 > /tmp/$t.log 2>&1; echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' /tmp/$t.log | tr '\n' ' ')"
  cat /tmp/$t.log >> $OUT/gpu_tests.log
done
echo done

#!/usr/bin/env bash
# Session 32, call 1: the decode step's barrier levels by how they are recorded and where they run: the
# recorder's barriers narrowed to the stages that ran (the build's default) against the old wide ones
# (KVTRIE_BARRIER=wide), the barrier recorded after the dispatch's binds (KVTRIE_BARRIER_LATE=1), and the
# work on the compute-only queue family (KVTRIE_QUEUE_FAMILY=compute-only, as llama.cpp picks) against the
# first family with compute; 8B and 1B Q4_0 at 512, alternately, three rounds; their spans; sweep-matvec's
# chained and independent Q4_0 products on either family.
. bench/device_call_env.sh
make_models 8b-Q4_0 1b-Q4_0
vulkaninfo --summary 2>/dev/null | head -5
wait_models
v() {  # v LABEL VAR=VALUE...: dec of $MODEL at $CTX with those variables set
  local lab=$1; shift
  ( export "$@"; dec $B $lab $MODEL $CTX --sequences 1 )
}
for round in 1 2 3; do
  for MODEL in 8b-Q4_0 1b-Q4_0; do
    CTX=512
    v narrow X=1
    v wide KVTRIE_BARRIER=wide
    v cq KVTRIE_QUEUE_FAMILY=compute-only
    v cq-late KVTRIE_QUEUE_FAMILY=compute-only KVTRIE_BARRIER_LATE=1
    v late KVTRIE_BARRIER_LATE=1
  done
done
for MODEL in 8b-Q4_0; do
  CTX=4096
  v narrow X=1; v cq KVTRIE_QUEUE_FAMILY=compute-only; v narrow X=1; v cq KVTRIE_QUEUE_FAMILY=compute-only
done
decode_summary
for f in "" compute-only; do
  for m in span profile; do
    KVTRIE_QUEUE_FAMILY=$f timeout 60 $B/kvtrie-bench decode --model $M/8b-Q4_0.gguf --context 512 --tokens 64 --sequences 1 --$m 2>/dev/null |
      grep -E '"decode_(span|profile)' | sed "s/^{/{\"label\":\"q$f-$m\",/" >> $OUT/spans.jsonl
  done
done
grep decode_span $OUT/spans.jsonl
python3 - $OUT/spans.jsonl <<'PY'
import json, sys, collections
t = collections.defaultdict(float)
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["bench"] == "decode_profile": t[r["label"]] += r.get("ms", 0)
print(dict(t))
PY
for f in "" compute-only; do
  KVTRIE_QUEUE_FAMILY=$f sw $B q$f --types Q4_0 --rows-per-lane 1
  KVTRIE_QUEUE_FAMILY=$f sw $B q$f-ind --types Q4_0 --rows-per-lane 1 --independent
done
sweep_summary
echo done

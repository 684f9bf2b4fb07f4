#!/usr/bin/env bash
# Session 32, call 2 (build ab8461e: the compute-only queue family by default): that family against the
# first (KVTRIE_QUEUE_FAMILY=first) for every 8B type and the 1B Q4_0 at 512, the 8B Q4_0 at 4096 and
# its prefill, alternately; then, on the compute-only family, the L2 prefetch's size and attention's split
# again (8B Q4_0 at 512), and the logits product's launch shapes (sweep-matvec).
. bench/device_call_env.sh
make_models 8b-Q4_0 1b-Q4_0 8b-Q4_K 8b-Q8_0
wait_models
v() {  # v LABEL VAR=VALUE... -- decode args
  local lab=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  ( export "${envs[@]}"; dec $B $lab $MODEL $CTX --sequences 1 "$@" )
}
for MODEL in 8b-Q4_0 8b-Q4_K 8b-Q8_0 1b-Q4_0; do
  CTX=512
  for round in 1 2; do v first KVTRIE_QUEUE_FAMILY=first --; v cq X=1 --; done
done
MODEL=8b-Q4_0 CTX=4096
for round in 1 2; do v first KVTRIE_QUEUE_FAMILY=first --; v cq X=1 --; done
MODEL=8b-Q4_0 CTX=512
for round in 1 2; do
  v rule X=1 --
  for mib in 8 24 32; do v o+$mib X=1 -- --prefetch-o --prefetch-ffn-mib $mib; done
  v split64 X=1 -- --attention-split 64
  v none X=1 -- --no-prefetch
done
decode_summary
for f in first cq; do
  KVTRIE_QUEUE_FAMILY=$f timeout 60 $B/kvtrie-bench prefill --model $M/8b-Q4_0.gguf --prompt 512 2>/dev/null |
    grep '"prefill' | sed "s/^{/{\"label\":\"$f\",/" >> $OUT/prefill.jsonl
done
cat $OUT/prefill.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l); print(r['label'], r.get('tok_s'))"
sw $B logits --types Q4_0 --shapes logits --rows-per-lane 1,2,4,8 --threads-per-row 0,64
sweep_summary
echo done

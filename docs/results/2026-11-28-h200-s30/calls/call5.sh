#!/usr/bin/env bash
# Session 30, call 5: the products' tail prefetch (matvec_q8's prefetch_next) in the 8B Q4_0 step at 512:
# the rule (o + 16 MiB of gate/up beside attention) alone, with the next layer's Q/K/V read in the down
# projection's tail, with 8 or 16 MiB of down read in gate/up's tail, and both; alternately, three rounds;
# then 4096 for the best two, registers, and a profile.
. bench/device_call_env.sh
make_models 8b-Q4_0
wait_models
RULE="--prefetch-o --prefetch-ffn-mib 16 --prefetch-groups 512"
for round in 1 2 3; do
  dec $B rule 8b-Q4_0 512 --sequences 1
  dec $B qkv 8b-Q4_0 512 --sequences 1 $RULE --prefetch-next-qkv
  dec $B down8 8b-Q4_0 512 --sequences 1 $RULE --prefetch-down-mib 8
  dec $B down16 8b-Q4_0 512 --sequences 1 $RULE --prefetch-down-mib 16
  dec $B qkv_down8 8b-Q4_0 512 --sequences 1 $RULE --prefetch-next-qkv --prefetch-down-mib 8
done
for round in 1 2; do
  dec $B rule 8b-Q4_0 4096 --sequences 1
  dec $B qkv 8b-Q4_0 4096 --sequences 1 $RULE --prefetch-next-qkv
  dec $B qkv_down8 8b-Q4_0 4096 --sequences 1 $RULE --prefetch-next-qkv --prefetch-down-mib 8
done
dec $B stats 8b-Q4_0 512 --sequences 1 --tokens 8 --shader-stats
decode_summary
grep shader_stats $OUT/decode.jsonl | grep -E 'matvec_q8i_(acc_qnorm|norm_swiglu_qout|norm_qkv)_q4_0x8' | grep -i regist | cut -c1-300
echo done

#!/usr/bin/env bash
# Session 32, call 5 (ba0d3b9 + a dispatch probe, KVTRIE_PROBE_DISPATCH, not kept): whether a dispatch's
# inline state costs step time on this driver, after push descriptors lost 1-2% (call 4): each push-constant
# block recorded twice (1) or the descriptor set bound twice (2), against once (0); 8B Q4_0 and 1B Q4_0 at
# 512, alternately, three rounds. Then --deterministic against the default (8B Q4_0 at 512 and 4096).
. bench/device_call_env.sh
make_models 8b-Q4_0 1b-Q4_0
wait_models
for round in 1 2 3; do
  for m in 8b-Q4_0 1b-Q4_0; do
    for p in 0 1 2; do KVTRIE_PROBE_DISPATCH=$p dec $B probe$p $m 512 --sequences 1; done
  done
done
for round in 1 2; do
  for c in 512 4096; do
    dec $B default 8b-Q4_0 $c --sequences 1
    dec $B deterministic 8b-Q4_0 $c --sequences 1 --deterministic
  done
done
decode_summary
echo done

#!/usr/bin/env bash
# Session 31, call 3: call 2's hand-off lost (8B Q4_0 at 512 -3.5%, the 1B -19%). Is it the coherent K/V
# loads (every K and V load of the HANDOFF build through coherent bindings)? This build reads K and V as the
# plain builds do (q alone coherent). Hand-off against --no-handoff alternately; the GPU test again.
. bench/device_call_env.sh
make_models 8b-Q4_0 1b-Q4_0
export KVTRIE_VALIDATION=0
timeout 60 $B/kernels_test_matvec_q8 --gtest_brief=1 --gtest_filter='*Handoff*' 2>&1 | grep -vE "^\[20" | tail -3
wait_models
for round in 1 2 3; do
  dec $B handoff 8b-Q4_0 512 --sequences 1
  dec $B barrier 8b-Q4_0 512 --sequences 1 --no-handoff
  dec $B handoff 1b-Q4_0 512 --sequences 1
  dec $B barrier 1b-Q4_0 512 --sequences 1 --no-handoff
done
dec $B handoff-profile 8b-Q4_0 512 --sequences 1 --profile
dec $B barrier-profile 8b-Q4_0 512 --sequences 1 --profile --no-handoff
decode_summary
echo done

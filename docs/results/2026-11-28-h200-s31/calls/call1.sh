#!/usr/bin/env bash
# Session 31, call 1: lanes smaller than a subgroup (matvec_q8.comp's SUBGROUP_LANES, new) and more rows a
# lane, so that the one-token products fit fewer waves of work groups. The 8B's gate/up in 16 lanes of 32
# threads is 1.7 waves of an H200's 2,048 threads a multiprocessor; in lanes of 16 threads (or of 32 with 2
# rows) it is 0.85. sweep-matvec chained as in a step, two rounds, then the step itself as a reference.
. bench/device_call_env.sh
make_models 8b-Q4_0
g() { sw $B "$1" --types ${T:-Q4_0} --shapes gate_up --rows-per-lane $2 --threads-per-row $3 --workgroups $4; }
r() { sw $B "$1" --types Q4_0 --shapes o,down --mode acc_qnorm --rows-per-lane $2 --threads-per-row $3 --workgroups $4; }
q() { sw $B "$1" --types Q4_0 --shapes qkv --rows-per-lane $2 --threads-per-row $3 --workgroups $4; }
for round in 1 2; do
  g base 1 32 512; g t16w256 1 16 256; g t16w512 1 16 512; g t8w128 1 8 128; g t8w256 1 8 256
  g r2t32w256 2 32 256; g r2t32w512 2 32 512; g r2t16w128 2 16 128; g r2t16w256 2 16 256
  r base 1 64 1024; r t32w512 1 32 512; r t16w256 1 16 256; r r2t32w256 2 32 256
  q base 1 32 128; q t16w64 1 16 64; q t16w128 1 16 128; q r2t16w128 2 16 128
done
T=Q4_K,Q8_0 g base 1 32 512; T=Q4_K,Q8_0 g t16w256 1 16 256; T=Q4_K,Q8_0 g r2t32w256 2 32 256
sweep_summary
wait_models
for round in 1 2; do dec $B base 8b-Q4_0 512 --sequences 1; done
decode_summary
echo done

#!/usr/bin/env bash
# Session 30, call 1: where the 8B Q4_0 decode step's time goes, on the final kernels of session 29.
#  - sweep-matvec of Q4_0's four one-token products (and Q8_0's, for comparison) in the engine's shapes:
#    as built, without x's loads (nox: what staging x could give at most), without the arithmetic (nodot);
#    each chained as in a step and --independent (no barriers: what overlapping levels could give).
#  - sweep-attention at 512 and 4096 with the decode pass's probes (no P V, no K loads, no key loop).
#  - the step itself, three runs and a profile.
. bench/device_call_env.sh
make_models 8b-Q4_0
for round in 1 2; do
  for ind in "" --independent; do
    for v in base nox nodot; do
      pr=""; [ $v != base ] && pr="--probe $v"
      sw $B $v --types Q4_0,Q8_0 --shapes qkv --rows-per-lane 1 --workgroups 128 --threads-per-row 32 $pr $ind
      sw $B $v --types Q4_0,Q8_0 --shapes gate_up --rows-per-lane 1 --workgroups 512 --threads-per-row 32 $pr $ind
      sw $B $v --types Q4_0,Q8_0 --shapes o,down --mode acc_qnorm --rows-per-lane 1 --workgroups 1024 --threads-per-row 64 $pr $ind
    done
  done
done
sweep_summary
for c in "512 128" "4096 512"; do
  set -- $c
  timeout 60 $B/kvtrie-bench sweep-attention --model llama3-8b --contexts $1 --sequences 1 --splits $2 \
    --variants decode,decode_kl2,decode_probe1,decode_probe2,decode_probe5 --merge-in-pass --evict-mib 256 \
    2>/dev/null | grep '^{' >> $OUT/attention.jsonl
done
python3 - $OUT/attention.jsonl <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print({k: v for k, v in r.items() if k not in ("bench", "device", "model")})
PY
wait_models
for round in 1 2 3; do dec $B base 8b-Q4_0 512 --sequences 1; done
dec $B profile 8b-Q4_0 512 --sequences 1 --profile
decode_summary
echo done

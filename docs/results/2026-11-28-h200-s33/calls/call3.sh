#!/usr/bin/env bash
# Session 33, call 3 (7fd2ce0 + the --probe-step-repeats probe): what a submission costs the device beside
# a step. Each submission runs its step k times over (k = 1, 2, 4; step_ms is the submission's).
. bench/device_call_env.sh
make_models 8b-Q4_0 1b-Q4_0
wait_models
for r in 1 2; do
  for k in 1 2 4; do
    dec $B rows_k$k 8b-Q4_0 512 --probe-step-repeats $k
    dec $B greedy_k$k 8b-Q4_0 512 --greedy --probe-step-repeats $k
  done
done
for r in 1 2; do for k in 1 2 4; do dec $B rows_k$k 1b-Q4_0 512 --probe-step-repeats $k; done; done
python3 - $OUT/decode.jsonl <<'PY'
import json, sys, collections
t = collections.defaultdict(list)
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["bench"] == "decode":
        k = r["probe_step_repeats"]
        t[(r["model"], r["label"])].append(round(r["step_ms"] / k * 1000, 1))
for key, v in t.items(): print(key, "us a step:", v)
PY
echo done

#!/usr/bin/env bash
# Session 31, call 6: the one-token logits product in 1 or 4 rows a lane, by where its output goes: into
# host memory (the logits read back, as the table's decode does) or device memory (--greedy: the argmax on
# the GPU), for Q4_0, Q8_0 and Q4_K 8B models and the 1B Q4_0, alternately; and their profiles.
. bench/device_call_env.sh
make_models 8b-Q4_0 1b-Q4_0 8b-Q8_0 8b-Q4_K
wait_models
for m in 8b-Q4_0 8b-Q8_0 8b-Q4_K 1b-Q4_0; do
  for round in 1 2 3; do
    for g in "" --greedy; do
      dec $B lg1${g:+-greedy} $m 512 --sequences 1 --logits-rows-per-lane 1 $g
      dec $B lg4${g:+-greedy} $m 512 --sequences 1 --logits-rows-per-lane 4 $g
    done
  done
  for lg in 1 4; do dec $B lg$lg-profile $m 512 --sequences 1 --logits-rows-per-lane $lg --profile; done
done
python3 - $OUT/decode.jsonl <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["bench"] == "decode_profile" and r["op"].startswith("matvec_q8i_norm_") and r["dispatches"] == 1:
        print(r["model"], r["label"], r["op"], r["ms"])
PY
decode_summary | grep -v profile
echo done

#!/usr/bin/env bash
# Session 32, call 3 (build 25afa22 against ab8461e): the embedding lookup writing the first layer's normed,
# quantized input itself (get_rows_qnorm, one level fewer) against the separate quantize pass, 8B and 1B
# Q4_0 at 512, alternately, three rounds; attention alone at 512-4096 by split and build (sweep-attention,
# merged in the pass as steps run it; decode_probe5 is the pass without its key loop); every GPU test.
. bench/device_call_env.sh
make_models 8b-Q4_0 1b-Q4_0
wait_models
for round in 1 2 3; do
  for m in 8b-Q4_0 1b-Q4_0; do
    dec $B_OLD sep $m 512 --sequences 1
    dec $B fused $m 512 --sequences 1
  done
done
decode_summary
timeout 150 $B/kvtrie-bench sweep-attention --model llama3-8b --contexts 512,1024,4096 --sequences 1 \
  --splits 64,128,256,512 --merge-in-pass \
  --variants decode,decode_kl2,decode_kl4,decode_p16_kl1,decode_p16vk4_kl1,decode_p16_kl2,decode_p16_kl4,decode_probe5 \
  2>/dev/null > $OUT/sweep_attention.jsonl
echo "sweep-attention rc=$?"
python3 - $OUT/sweep_attention.jsonl <<'PY'
import json, sys, collections
t = collections.OrderedDict()
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    r = json.loads(l)
    t.setdefault((r.get("context"), r.get("split")), []).append("%s %.2f" % (r.get("variant"), r.get("us_per_layer", r.get("us", 0))))
for k, v in t.items(): print(k, "  ".join(v))
PY
STEPS=tests timeout 240 bench/run_device.sh $B /tmp/rt > $OUT/gpu_tests.log 2>&1
echo "gpu tests rc=$?"
grep -E "PASSED|FAILED|tests ran|rc=" $OUT/gpu_tests.log | tail -40
echo done

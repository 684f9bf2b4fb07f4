#!/usr/bin/env bash
# Session 30, call 8: attention's level at 512 and 4096 (sweep-attention, merged in the pass, 256 MiB read
# between layers) for the engine's build (8 subgroups; 2 lanes a key below 256 positions a split) against
# 4 lanes a key and the 16-subgroup tuning builds, over split sizes: is a shorter chain there on the H200?
. bench/device_call_env.sh
for round in 1 2; do
  for c in "512 64,128,256,512" "4096 256,512,1024"; do
    set -- $c
    timeout 100 $B/kvtrie-bench sweep-attention --model llama3-8b --contexts $1 --sequences 1 --splits $2 \
      --variants decode,decode_kl2,decode_kl4,decode_p16_kl2,decode_p16_kl4,decode_p16vk4_kl2 --merge-in-pass \
      --evict-mib 256 2>/dev/null | grep '^{' >> $OUT/attention.jsonl
  done
done
python3 - $OUT/attention.jsonl <<'PY'
import collections, json, sys
t = collections.OrderedDict()
for l in open(sys.argv[1]):
    r = json.loads(l)
    t.setdefault((r["context"], r["variant"]), collections.OrderedDict()).setdefault(r["split"], []).append(round(r["us"], 2))
for k, d in t.items():
    print(k, "  ".join("split %s: %s" % (s, v) for s, v in d.items()))
PY
echo done

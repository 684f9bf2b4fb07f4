#!/usr/bin/env bash
# Session 33, call 7 (3478e82): the L2 prefetch beside attention in fewer or more work groups (the rule: o +
# 16 MiB of gate/up in 512 groups), 8B Q4_0 at 512 and 4096, alternately, against the read bound measured in
# the same call; and llama.cpp's tg on the same file.
. bench/device_call_env.sh
make_models 8b-Q4_0
$B/kvtrie-bench bandwidth --mib 2048 2>/dev/null | grep '"bench":"bandwidth"' | tail -1 > $OUT/bandwidth.jsonl
BW=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read())["read_bytes_per_s"])' $OUT/bandwidth.jsonl)
echo "read bandwidth $BW"
wait_models
for r in 1 2 3; do
  dec $B rule 8b-Q4_0 512 --read-bandwidth $BW
  for g in 128 256 1024; do
    dec $B g$g 8b-Q4_0 512 --read-bandwidth $BW --prefetch-o --prefetch-ffn-mib 16 --prefetch-groups $g
  done
done
for g in 128 256; do dec $B g$g 8b-Q4_0 4096 --read-bandwidth $BW --prefetch-o --prefetch-ffn-mib 16 --prefetch-groups $g; done
dec $B rule 8b-Q4_0 4096 --read-bandwidth $BW
decode_summary
python3 - $OUT/decode.jsonl <<'PY'
import json, sys, collections
t = collections.defaultdict(list)
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["bench"] == "decode" and r["context"] == 512: t[r["label"]].append(round(100 * r["bound_ratio"], 2))
for k, v in t.items(): print(k, "% of the read bound:", v)
PY
LD_LIBRARY_PATH=$P/lib timeout 90 $P/peerbench $M/8b-Q4_0.gguf $P/lib 99 512 64 2 > $OUT/peer.txt 2>&1; grep -iE "tg|t/s" $OUT/peer.txt | grep -v load | tail -4
echo done

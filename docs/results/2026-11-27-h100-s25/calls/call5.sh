#!/usr/bin/env bash
# Session 25, call 5: is the overlap's computing slowed by the host tier's chunks being pinned beside it?
# The same build with the bench's host tier of 3000 MiB (chunks committed ahead while the hit computes) and
# of 1100 MiB (the hit's read fills the chunks committed at start; one more to commit), alternately.
. bench/device_call_env.sh
mkdir -p /tmp/models /tmp/disk
disk_ttft() {  # label host_mb
  timeout 200 python3 bench/disk_tier_ttft.py $B /tmp/models/llama3-8b-Q4_0.gguf /tmp/disk/d --kv-host-mb $2 2>>$OUT/disk.err |
    sed "s/^{/{\"label\":\"$1\",/" | tee -a $OUT/disk_tier_ttft.jsonl | python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l); print(r["label"], r["step"], r.get("ttft_ms", r.get("gbs")), r.get("cached_tokens_disk",""), flush=True)'
  grep -E "met its disk read|load:" /tmp/disk/d.log | sed "s/^/$1 /" >> $OUT/meets.log 2>/dev/null
}
timeout 90 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 14 -o /tmp/models/llama3-8b-Q4_0.gguf > /dev/null 2>&1
for r in 1 2; do disk_ttft host3000 3000; disk_ttft host1100 1100; done
grep "met its" $OUT/meets.log | sed 's/kv disk tier: //' | cut -c1-200
echo done

#!/usr/bin/env bash
# Session 27, call 5: the final code's table (run_device.sh, limits and models, the session-12 settings) on
# whatever card comes (asked for any; an H200 is the card issue 16's Q8_0 row needs), then 8B Q4_0 decode
# under --deterministic beside the default at 512 and 4096, alternately.
. bench/device_call_env.sh
PEER_DIR=$P STEPS="limits models" PRESETS="llama3-8b llama3-1b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
  MODELS_DIR=/tmp/rdmodels timeout 420 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
echo "run_device rc=$?"; grep -v "^\s*$" /tmp/rd/summary.md | head -40
tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
M=/tmp/m; mkdir -p $M
timeout 60 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 8 -o $M/8b.gguf > /dev/null 2>&1
for c in 512 4096; do for mode in default deterministic; do
  timeout 40 $B/kvtrie-bench decode --model $M/8b.gguf --context $c --sequences 1 --tokens 64 \
    $([ $mode = deterministic ] && echo --deterministic) 2>/dev/null | sed "s/^{/{\"label\":\"$mode\",/" | tee -a $OUT/det.jsonl |
    python3 -c 'import json,sys
for l in sys.stdin: r=json.loads(l); print(r["label"], r["context"], round(r["tok_s"],1))'
done; done
echo done

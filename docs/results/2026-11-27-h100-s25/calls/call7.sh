#!/usr/bin/env bash
# Session 25, call 7: the final code's table (run_device.sh, limits and models, the session-12 settings)
# on whatever card comes (asked for any; an H200 is the card issue 16's Q8_0 row needs).
. bench/device_call_env.sh
PEER_DIR=$P STEPS="limits models" PRESETS="llama3-8b llama3-1b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
  MODELS_DIR=/tmp/rdmodels timeout 450 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
echo "run_device rc=$?"; grep -v "^\s*$" /tmp/rd/summary.md | head -40
tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
echo done

#!/usr/bin/env bash
# Session 25, call 6: the final code. H200: the table (run_device.sh, limits and models, the session-12
# settings), then the engine's GPU tests. H100: every GPU test binary, then the HTTP multi-turn row
# (run_device.sh's http step, the session-12 settings) against llama.cpp.
. bench/device_call_env.sh
if [[ "$GPU" == *H200* ]]; then
  PEER_DIR=$P STEPS="limits models" PRESETS="llama3-8b llama3-1b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
    MODELS_DIR=/tmp/rdmodels timeout 400 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
  echo "run_device rc=$?"; grep -v "^\s*$" /tmp/rd/summary.md | head -40
  tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
  timeout 100 $B/runner_test_gpu_engine --gtest_brief=1 > $OUT/engine_tests.log 2>&1; echo "engine tests rc=$?"
else
  STEPS="tests" timeout 300 bench/run_device.sh $B /tmp/rdt > $OUT/gpu_tests.log 2>&1
  echo "tests rc=$?"; grep -E "== test|failed|done in" /tmp/rdt/bench.log | tail -25
  tar czf $OUT/rdt.tar.gz -C /tmp rdt 2>/dev/null
  PEER_DIR=$P STEPS="http" PRESETS="llama3-8b" TYPES="Q4_0" HTTP_STREAM=0 HTTP_CONVERSATIONS=16 HTTP_TURNS=4 \
    MODELS_DIR=/tmp/models timeout 250 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
  echo "run_device http rc=$?"; grep -v "^\s*$" /tmp/rd/summary.md | head -20
  tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
fi
echo done

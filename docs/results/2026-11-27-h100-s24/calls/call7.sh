#!/usr/bin/env bash
# Session 24, call 7: the final build (5dcce12). H200: the table first (run_device.sh, no http). Then, on any
# card: kvtrie-bench sample on this host's CPU; top-p without top-k before and after its octave search
# (tp_old: the sampler of 00b2f5c, tp_new: this one; calls/call7_top_p_alone.cpp); one request decoding 512
# tokens through GpuEngine, greedy and at temperature 0.8 (llama3-8b and llama3-1b Q4_0); the GPU tests of
# the engine and model.
R=$PWD
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/w && cd /tmp/w && tar xJf $R/.device/bin.tar.xz && tar xJf $R/.device/llamacpp-peer.tar.xz
B=/tmp/w/BIN; P=/tmp/w/llamacpp-peer
export LD_LIBRARY_PATH=$B/lib
cat $B/COMMIT; GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
M=/tmp/m2; mkdir -p $M
(timeout 60 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 8 -o $M/8b.gguf;
 timeout 60 $B/kvtrie-synth --preset llama3-1b --type Q4_0 --threads 8 -o $M/1b.gguf) > $OUT/synth.log 2>&1 &
SP=$!
cd $R
if [[ "$GPU" == *H200* ]]; then
  PEER_DIR=$P STEPS="limits models" PRESETS="llama3-8b llama3-1b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
    MODELS_DIR=/tmp/models timeout 330 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
  echo "run_device rc=$?"; grep -v "^\s*$" /tmp/rd/summary.md | head -36
  tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
fi
$B/kvtrie-bench sample 2>/dev/null | tee $OUT/sample.jsonl
for i in 1 2; do .device/tp_old | sed "s/^/old /"; .device/tp_new | sed "s/^/new /"; done | tee $OUT/top_p_alone.txt
wait $SP
mt() {  # label model [extra]
  local lab=$1 m=$M/$2.gguf; shift 2
  timeout 60 $B/kvtrie-bench multiturn --model $m --conversations 1 --turns 1 --system 512 --user 16 --answer 512 \
    --parallel 1 --no-baseline "$@" 2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"label\":\"$lab\",/" | tee -a $OUT/multiturn.jsonl |
    python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["bench"]!="multiturn": continue
  ttft=r.get("ttft_cold_ms") or 0
  print(r["label"], r["model"], "decode tok/s", round((r["completion_tokens"]-1)/(r["seconds"]-ttft/1e3),1))'
}
for i in 1 2; do for m in 8b 1b; do mt greedy $m; mt t08 $m --temperature 0.8; done; done
for t in runner_test_gpu_model runner_test_gpu_engine; do
  timeout 60 $B/$t --gtest_brief=1 > $OUT/$t.log 2>&1; echo $t rc=$?; tail -n 2 $OUT/$t.log
done
echo done

#!/usr/bin/env bash
# Session 23, the table call: bench/run_device.sh (limits, models with llama.cpp beside, http) on this main,
# then the GPU tests of the merged session-22 work, and --deterministic beside the default (8B Q4_0, 512/4096).
R=$PWD
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/w && cd /tmp/w && tar xJf $R/.device/bin.tar.xz && tar xJf $R/.device/llamacpp-peer.tar.xz
B=/tmp/w/BIN; P=/tmp/w/llamacpp-peer
export LD_LIBRARY_PATH=$B/lib
cat $B/COMMIT; nvidia-smi --query-gpu=name --format=csv,noheader
cd $R
PEER_DIR=$P STEPS="limits models http" PRESETS="llama3-8b llama3-1b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
  HTTP_STREAM=0 HTTP_CONVERSATIONS=16 HTTP_TURNS=4 MODELS_DIR=/tmp/models timeout 390 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
echo "run_device rc=$?"
tail -45 /tmp/rd/bench.log | grep -v "^\s*$"
cp /tmp/rd/summary.md /tmp/rd/side_by_side.jsonl /tmp/rd/results.jsonl $OUT/ 2>/dev/null
tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
for t in kernels_test_attention kernels_test_matvec_q8 runner_test_gpu_model runner_test_gpu_engine; do
  timeout 70 $B/$t --gtest_brief=1 > $OUT/$t.log 2>&1; echo $t rc=$?; tail -2 $OUT/$t.log
done
M=/tmp/models/q40.gguf
timeout 60 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 14 -o $M > $OUT/synth.log 2>&1
for c in 512 4096; do for i in 1 2; do
  for d in "" --deterministic; do
    timeout 30 $B/kvtrie-bench decode --model $M --context $c --sequences 1 --tokens 64 $d 2>>$OUT/bench.err | grep '^{' |
      sed "s/^{/{\"label\":\"det${d:+1}\",/" | tee -a $OUT/det.jsonl | python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["bench"]=="decode": print(r["label"], r["context"], round(r["tok_s"],1))'
  done
done; done
echo done

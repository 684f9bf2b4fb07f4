#!/usr/bin/env bash
# Session 24, call 11: a step's sampled rows sampled on 4 threads at once (BIN: branch s24-parallel-sampling)
# against one after another (OLD: 1596a8a, main's code), alternately on the same files, through GpuEngine
# at temperature 0.8 (llama3-8b and llama3-1b Q4_0): 8 requests at once, and one; the GPU tests of the
# engine. H200: the table first.
R=$PWD
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/w /tmp/o && cd /tmp/w && tar xJf $R/.device/bin.tar.xz && tar xJf $R/.device/llamacpp-peer.tar.xz
cd /tmp/o && tar xJf $R/.device/old.tar.xz
B=/tmp/w/BIN; O=/tmp/o/BIN; P=/tmp/w/llamacpp-peer
export LD_LIBRARY_PATH=$B/lib
cat $B/COMMIT $O/COMMIT; GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
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
for t in runner_test_gpu_engine; do
  timeout 60 $B/$t --gtest_brief=1 > $OUT/$t.log 2>&1; echo $t rc=$?; tail -n 2 $OUT/$t.log
done
wait $SP
mt() {  # label bin model conversations [extra]
  local lab=$1 bin=$2 m=$M/$3.gguf c=$4; shift 4
  timeout 60 $bin/kvtrie-bench multiturn --model $m --conversations $c --turns 1 --system 512 --user 16 --answer 512 \
    --parallel $c --no-baseline "$@" 2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"label\":\"$lab\",/" | tee -a $OUT/multiturn.jsonl |
    python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["bench"]!="multiturn": continue
  ttft=r.get("ttft_cold_ms") or 0
  print(r["label"], r["model"], r["conversations"], "completion tok/s", round(r["completion_tok_s"],1), "decode tok/s (1 conv)", round((r["completion_tokens"]-1)/(r["seconds"]-ttft/1e3),1))'
}
for i in 1 2 3; do for m in 8b 1b; do mt old $O $m 8 --temperature 0.8; mt new $B $m 8 --temperature 0.8; done; done
for m in 8b 1b; do mt old $O $m 1 --temperature 0.8; mt new $B $m 1 --temperature 0.8; done
for m in 8b 1b; do
  timeout 40 $B/kvtrie-bench decode --model $M/$m.gguf --context 528 --sequences 1 --tokens 64 2>>$OUT/bench.err | grep '^{' | tee -a $OUT/decode.jsonl |
    python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["bench"]=="decode": print("GpuModel decode", r["model"], r["context"], round(r["tok_s"],1))'
done
echo done

#!/usr/bin/env bash
# Session 23, call 9: the L2 prefetch's default rule (auto_l2_prefetch: 8B Q4_0's one-token steps) against
# --no-prefetch, alternately: 8B Q4_0 at 512, 2048, 4096, 8 sequences (the rule off), 8B Q4_K (the rule off);
# the GpuModel and engine GPU tests first.
R=$PWD
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/w && cd /tmp/w && tar xJf $R/.device/bin.tar.xz
B=/tmp/w/BIN
export LD_LIBRARY_PATH=$B/lib
cat $B/COMMIT; nvidia-smi --query-gpu=name --format=csv,noheader
(timeout 60 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 14 -o /tmp/q40.gguf
 timeout 90 $B/kvtrie-synth --preset llama3-8b --type Q4_K --threads 14 -o /tmp/q4k.gguf) > $OUT/synth.log 2>&1 &
for t in runner_test_gpu_model runner_test_gpu_engine; do
  timeout 60 $B/$t --gtest_brief=1 > $OUT/$t.log 2>&1; echo $t rc=$?; tail -2 $OUT/$t.log
done
wait
dec() {  # label model ctx seqs [extra]
  local lab=$1 m=$2 c=$3 n=$4; shift 4
  timeout 30 $B/kvtrie-bench decode --model $m --context $c --sequences $n --tokens 64 "$@" 2>>$OUT/bench.err |
    grep '^{' | sed "s/^{/{\"label\":\"$lab\",/" | tee -a $OUT/decode.jsonl | python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["bench"]=="decode": print(r["label"], r["model"], r["context"], r["sequences"], round(r["tok_s"],1))'
}
for i in 1 2 3 4; do dec default /tmp/q40.gguf 512 1; dec off /tmp/q40.gguf 512 1 --no-prefetch; done
for c in 2048 4096; do for i in 1 2; do dec default /tmp/q40.gguf $c 1; dec off /tmp/q40.gguf $c 1 --no-prefetch; done; done
dec default /tmp/q40.gguf 512 8; dec off /tmp/q40.gguf 512 8 --no-prefetch
dec default /tmp/q4k.gguf 512 1; dec off /tmp/q4k.gguf 512 1 --no-prefetch

#!/usr/bin/env bash
# Session 23, the last call: every GPU test binary (run_device.sh's tests step) on the final build, then the
# default decode of 8B Q4_0 at 512 and 4096 beside the table's (ecf3786) figures.
R=$PWD
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/w && cd /tmp/w && tar xJf $R/.device/bin.tar.xz
B=/tmp/w/BIN
export LD_LIBRARY_PATH=$B/lib
cat $B/COMMIT; nvidia-smi --query-gpu=name --format=csv,noheader
timeout 150 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 14 -o /tmp/q40.gguf > $OUT/synth.log 2>&1 &
cd $R
STEPS="tests" timeout 280 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
echo "run_device rc=$?"
grep -E "==|PASSED|FAILED|failed|done in" /tmp/rd/bench.log | grep -v "^\s*$" | tail -40
cp /tmp/rd/bench.log $OUT/tests_bench.log
wait
for i in 1 2; do for c in 512 4096; do
  timeout 30 $B/kvtrie-bench decode --model /tmp/q40.gguf --context $c --sequences 1 --tokens 64 2>>$OUT/bench.err |
    grep '^{' | tee -a $OUT/decode.jsonl | python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["bench"]=="decode": print("default", r["context"], round(r["tok_s"],1))'
done; done

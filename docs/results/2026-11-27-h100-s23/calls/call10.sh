#!/usr/bin/env bash
# Session 23, call 10: attention_decode loading q beside the token's position (BIN) against the build before
# (OLD, 318c406), alternately: the GPU attention tests, sweep-attention's engine pass at 512 and 4096, whole
# decode of 8B Q4_0 at 512 and 4096 and of 1B Q4_0 at 512.
R=$PWD
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/w && cd /tmp/w && tar xJf $R/.device/bin.tar.xz && tar xJf $R/.device/old.tar.xz
B=/tmp/w/BIN; O=/tmp/w/OLD
export LD_LIBRARY_PATH=$B/lib
cat $B/COMMIT $O/COMMIT; nvidia-smi --query-gpu=name --format=csv,noheader
(timeout 60 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 14 -o /tmp/q40.gguf
 timeout 40 $B/kvtrie-synth --preset llama3-1b --type Q4_0 --threads 14 -o /tmp/1q40.gguf) > $OUT/synth.log 2>&1 &
timeout 60 $B/kernels_test_attention --gtest_brief=1 > $OUT/test_attention.log 2>&1; echo attention rc=$?; tail -3 $OUT/test_attention.log
for i in 1 2; do for lab in old new; do
  bin=$O; [ $lab = new ] && bin=$B
  timeout 60 $bin/kvtrie-bench sweep-attention --model llama3-8b --contexts 512,4096 --sequences 1 --variants decode \
    --splits 128,512 --merge-in-pass 2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"label\":\"$lab\",/" | tee -a $OUT/sweep.jsonl |
    python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l); print(r["label"], r["context"], r["variant"], r["split"], round(r["us"],2))'
done; done
wait
dec() {  # label bin model ctx
  timeout 30 $2/kvtrie-bench decode --model $3 --context $4 --sequences 1 --tokens 64 2>>$OUT/bench.err |
    grep '^{' | sed "s/^{/{\"label\":\"$1\",/" | tee -a $OUT/decode.jsonl | python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["bench"]=="decode": print(r["label"], r["model"], r["context"], round(r["tok_s"],1))'
}
for i in 1 2 3 4; do dec old $O /tmp/q40.gguf 512; dec new $B /tmp/q40.gguf 512; done
for i in 1 2; do dec old $O /tmp/q40.gguf 4096; dec new $B /tmp/q40.gguf 4096; done
for i in 1 2; do dec old $O /tmp/1q40.gguf 512; dec new $B /tmp/1q40.gguf 512; done

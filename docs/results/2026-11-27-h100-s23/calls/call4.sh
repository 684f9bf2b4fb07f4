#!/usr/bin/env bash
# Session 23, call 4: decode steps' attention pulling the next products' weights into the L2 cache
# (--prefetch-o, --prefetch-ffn-mib, --prefetch-groups; AttentionArgs::l2_prefetch), against none, alternately
# on the same files: 8B Q4_0 at 512 (all variants, three rounds), then the leaders at 4096, Q8_0, Q4_K and
# the 1B; the 8B Q4_0 step's profile with and without; the GPU tests of the new code first.
R=$PWD
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/w && cd /tmp/w && tar xJf $R/.device/bin.tar.xz
B=/tmp/w/BIN
export LD_LIBRARY_PATH=$B/lib
cat $B/COMMIT; nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p /tmp/models
timeout 150 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 14 -o /tmp/models/q40.gguf > $OUT/synth.log 2>&1 &
S1=$!
timeout 100 $B/kernels_test_attention --gtest_brief=1 --gtest_filter='*Prefetch*:*LanesSharing*:*DecodePass*' > $OUT/test_attention.log 2>&1
echo attention tests rc=$?; tail -3 $OUT/test_attention.log
timeout 60 $B/runner_test_gpu_model --gtest_brief=1 > $OUT/test_gpu_model.log 2>&1; echo gpu_model rc=$?; tail -2 $OUT/test_gpu_model.log
J=$OUT/decode.jsonl
dec() {  # label model ctx seqs [extra]
  local lab=$1 m=/tmp/models/$2.gguf c=$3 n=$4; shift 4
  timeout 40 $B/kvtrie-bench decode --model $m --context $c --sequences $n --tokens 64 --read-bandwidth 2.87e12 "$@" \
    2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"label\":\"$lab\",/" | tee -a $J | python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["bench"]=="decode": print(r["label"], r["model"], r["context"], r["sequences"], round(r["tok_s"],1))'
}
wait $S1
(for m in "llama3-8b Q8_0 q80" "llama3-8b Q4_K q4k" "llama3-1b Q4_0 1q40"; do set -- $m
   timeout 150 $B/kvtrie-synth --preset $1 --type $2 --threads 14 -o /tmp/models/$3.gguf; done) >> $OUT/synth.log 2>&1 &
SP=$!
for i in 1 2 3; do
  dec none q40 512 1; dec o q40 512 1 --prefetch-o; dec o_ffn8 q40 512 1 --prefetch-o --prefetch-ffn-mib 8
  dec o_ffn16 q40 512 1 --prefetch-o --prefetch-ffn-mib 16; dec o_ffn32 q40 512 1 --prefetch-o --prefetch-ffn-mib 32
  dec ffn16 q40 512 1 --prefetch-ffn-mib 16
  dec o_g64 q40 512 1 --prefetch-o --prefetch-groups 64; dec o_g256 q40 512 1 --prefetch-o --prefetch-groups 256
done
wait $SP
for i in 1 2; do
  for m in q40 q80 q4k; do
    dec none $m 4096 1; dec o $m 4096 1 --prefetch-o; dec o_ffn16 $m 4096 1 --prefetch-o --prefetch-ffn-mib 16
  done
  for m in q80 q4k 1q40; do
    dec none $m 512 1; dec o $m 512 1 --prefetch-o; dec o_ffn16 $m 512 1 --prefetch-o --prefetch-ffn-mib 16
  done
  dec none q40 512 8; dec o q40 512 8 --prefetch-o; dec o_ffn16 q40 512 8 --prefetch-o --prefetch-ffn-mib 16
done
for v in none o o_ffn16; do
  case $v in none) X="";; o) X="--prefetch-o";; o_ffn16) X="--prefetch-o --prefetch-ffn-mib 16";; esac
  timeout 40 $B/kvtrie-bench decode --model /tmp/models/q40.gguf --context 512 --sequences 1 --tokens 32 $X --profile \
    2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"label\":\"$v\",/" >> $OUT/profiles.jsonl
done
python3 - $OUT/profiles.jsonl <<'PY'
import json,sys
for l in open(sys.argv[1]):
  r=json.loads(l)
  if r["bench"]=="decode_profile": print(r["label"], r["op"], r.get("dispatches"), round(r.get("ms", r.get("gpu_ms")),3))
PY
tail -2 $OUT/bench.err

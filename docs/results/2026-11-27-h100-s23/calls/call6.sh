#!/usr/bin/env bash
# Session 23, call 6 (after call 5 of the same build, call5.sh): 512 and 1024 prefetching work groups
# on every model. Call 5: kernels::l2_prefetch recorded beside decode steps' attention (no barrier between), pulling
# the next products' weights into the L2 cache (--prefetch-o, --prefetch-ffn-mib, --prefetch-groups; call 4 had
# the same reads inside attention_decode's own grid, which lengthened it), against none, alternately
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
(for m in "llama3-8b Q4_K q4k" "llama3-8b Q8_0 q80" "llama3-1b Q4_0 1q40"; do set -- $m
   timeout 150 $B/kvtrie-synth --preset $1 --type $2 --threads 14 -o /tmp/models/$3.gguf; touch /tmp/models/$3.done
 done) >> $OUT/synth.log 2>&1 &
touch /tmp/models/q40.done
for m in q40 q4k q80 1q40; do
  for s in $(seq 200); do [ -f /tmp/models/$m.done ] && break; sleep 1; done
  for i in 1 2; do
    for c in 512 4096; do
      dec none $m $c 1; dec f8_g512 $m $c 1 --prefetch-ffn-mib 8 --prefetch-groups 512
      dec f16_g512 $m $c 1 --prefetch-ffn-mib 16 --prefetch-groups 512
      dec o_f16_g512 $m $c 1 --prefetch-o --prefetch-ffn-mib 16 --prefetch-groups 512
      dec o_f8_g1024 $m $c 1 --prefetch-o --prefetch-ffn-mib 8 --prefetch-groups 1024
    done
  done
done
for i in 1 2; do
  dec none q40 512 8; dec f16_g512 q40 512 8 --prefetch-ffn-mib 16 --prefetch-groups 512
  dec o_f8_g1024 q40 512 8 --prefetch-o --prefetch-ffn-mib 8 --prefetch-groups 1024
done
tail -2 $OUT/bench.err

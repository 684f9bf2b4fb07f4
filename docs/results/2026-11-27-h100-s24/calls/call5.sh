#!/usr/bin/env bash
# Session 24, call 5 (the last): main 00b2f5c (the Q8_0 prefetch rule; the Q4_K pairs reverted). H200: the
# table (run_device.sh, no http), --deterministic beside the default, and prefetch plans for 8B Q4_0 and Q8_0
# on that card. H100: every GPU test binary (run_device.sh's tests step).
R=$PWD
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/w && cd /tmp/w && tar xJf $R/.device/bin.tar.xz && tar xJf $R/.device/llamacpp-peer.tar.xz
B=/tmp/w/BIN; P=/tmp/w/llamacpp-peer
export LD_LIBRARY_PATH=$B/lib
cat $B/COMMIT; GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
cd $R
if [[ "$GPU" != *H200* ]]; then
  STEPS="tests" timeout 560 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
  echo "run_device rc=$?"; grep -E "rc=|PASSED|FAILED|SKIPPED \]" /tmp/rd.out | head -60
  cp /tmp/rd.out $OUT/tests.log; tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
  exit 0
fi
M=/tmp/m2; mkdir -p $M
(for t in Q4_0 Q8_0; do timeout 90 $B/kvtrie-synth --preset llama3-8b --type $t --threads 6 -o $M/8b-$t.gguf; done) > $OUT/synth.log 2>&1 &
SP=$!
PEER_DIR=$P STEPS="limits models" PRESETS="llama3-8b llama3-1b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
  MODELS_DIR=/tmp/models timeout 330 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
echo "run_device rc=$?"; grep -v "^\s*$" /tmp/rd/summary.md | head -36
tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
wait $SP
dec() {  # label model ctx [extra]
  local lab=$1 m=$M/$2.gguf c=$3; shift 3
  timeout 30 $B/kvtrie-bench decode --model $m --context $c --sequences 1 --tokens 64 "$@" 2>>$OUT/bench.err |
    grep '^{' | sed "s/^{/{\"label\":\"$lab\",/" | tee -a $OUT/decode.jsonl | python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["bench"]=="decode": print(r["label"], r["model"], r["context"], round(r["tok_s"],1))'
}
for c in 512 4096; do dec default 8b-Q4_0 $c; dec det 8b-Q4_0 $c --deterministic; done
for i in 1 2; do
  dec none 8b-Q4_0 512 --no-prefetch; dec rule 8b-Q4_0 512
  dec o_f32_g512 8b-Q4_0 512 --prefetch-o --prefetch-ffn-mib 32 --prefetch-groups 512
  dec none 8b-Q8_0 512 --no-prefetch; dec rule 8b-Q8_0 512
  dec o_f16_g512 8b-Q8_0 512 --prefetch-o --prefetch-ffn-mib 16 --prefetch-groups 512
done
echo done

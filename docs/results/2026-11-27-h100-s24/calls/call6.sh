#!/usr/bin/env bash
# Session 24, call 6: the sampler's vectorized block scans (BIN, 6d97741) against the sampler before them
# (OLD, 00b2f5c), alternately on the same files: one request decoding 512 tokens through GpuEngine (kvtrie-bench
# multiturn, 1 conversation of 1 turn: greedy both; the sampler's defaults at temperature 0.8 on the new
# build), llama3-8b and llama3-1b Q4_0; the sampler alone on this host's CPU (sb_old / sb_new: Sampler::sample
# on 128,256 normal logits, greedy and the defaults); GpuModel decode beside it. H200: the table first.
R=$PWD
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/w /tmp/o && cd /tmp/w && tar xJf $R/.device/bin.tar.xz && tar xJf $R/.device/llamacpp-peer.tar.xz
cd /tmp/o && tar xJf $R/.device/old.tar.xz
B=/tmp/w/BIN; O=/tmp/o/BIN; P=/tmp/w/llamacpp-peer
export LD_LIBRARY_PATH=$B/lib
cat $B/COMMIT $O/COMMIT; GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"; lscpu | grep "Model name"
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
for i in 1 2; do .device/sb_old | sed "s/^/old /"; .device/sb_new | sed "s/^/new /"; done | tee $OUT/sampler_alone.txt
wait $SP
mt() {  # label bin model [extra]
  local lab=$1 bin=$2 m=$M/$3.gguf; shift 3
  timeout 60 $bin/kvtrie-bench multiturn --model $m --conversations 1 --turns 1 --system 512 --user 16 --answer 512 \
    --parallel 1 --no-baseline "$@" 2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"label\":\"$lab\",/" | tee -a $OUT/multiturn.jsonl |
    python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["bench"]!="multiturn": continue
  ttft=r.get("ttft_cold_ms") or 0
  print(r["label"], r["model"], "completion tok/s", round(r["completion_tok_s"],1), "ttft", round(ttft,1), "decode tok/s", round((r["completion_tokens"]-1)/(r["seconds"]-ttft/1e3),1))'
}
for i in 1 2 3; do
  for m in 8b 1b; do mt old $O $m; mt new $B $m; mt new_t08 $B $m --temperature 0.8; done
done
for m in 8b 1b; do
  timeout 40 $B/kvtrie-bench decode --model $M/$m.gguf --context 528 --sequences 1 --tokens 64 2>>$OUT/bench.err | grep '^{' | tee -a $OUT/decode.jsonl |
    python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["bench"]=="decode": print("GpuModel decode", r["model"], r["context"], round(r["tok_s"],1))'
done
echo done

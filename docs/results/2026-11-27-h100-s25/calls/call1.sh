#!/usr/bin/env bash
# Session 25, call 1. H200: the table first (run_device.sh, limits and models, the session-12 settings), then
# the L2 prefetch plans on 8B Q4_0. H100: the prefetch plans beside every product and unwaited (an event
# instead of a barrier) on 8B Q4_0 and Q8_0, then the disk tier's reads at deeper queues.
. bench/device_call_env.sh
dec() {  # label model ctx [extra]
  local lab=$1 m=/tmp/models/$2.gguf c=$3; shift 3
  timeout 60 $B/kvtrie-bench decode --model $m --context $c --sequences 1 --tokens 128 "$@" 2>>$OUT/bench.err |
    grep '^{' | sed "s/^{/{\"label\":\"$lab\",/" | tee -a $OUT/decode.jsonl | python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["bench"]=="decode": print(r["label"], r["model"], r["context"], round(r["tok_s"],1), flush=True)'
}
G="--prefetch-groups 512"
q4_plans() {  # model ctx
  dec auto $1 $2
  dec none $1 $2 --no-prefetch
  dec autoU $1 $2 --prefetch-o --prefetch-ffn-mib 16 $G --prefetch-unwaited
  dec down8 $1 $2 --prefetch-o --prefetch-ffn-mib 16 --prefetch-down-mib 8 $G
  dec qkv8 $1 $2 --prefetch-o --prefetch-ffn-mib 16 --prefetch-qkv-mib 8 $G
  dec o8 $1 $2 --prefetch-o --prefetch-ffn-mib 16 --prefetch-ffn-mib-beside-o 8 $G
  dec oqkv $1 $2 --prefetch-o-beside-qkv --prefetch-ffn-mib 16 $G
  dec allW $1 $2 --prefetch-o-beside-qkv --prefetch-ffn-mib 16 --prefetch-ffn-mib-beside-o 8 --prefetch-down-mib 8 --prefetch-qkv-mib 8 $G
  dec allU $1 $2 --prefetch-o-beside-qkv --prefetch-ffn-mib 16 --prefetch-ffn-mib-beside-o 8 --prefetch-down-mib 8 --prefetch-qkv-mib 8 $G --prefetch-unwaited
  dec allU16 $1 $2 --prefetch-o-beside-qkv --prefetch-ffn-mib 24 --prefetch-ffn-mib-beside-o 16 --prefetch-down-mib 16 --prefetch-qkv-mib 16 $G --prefetch-unwaited
}
q8_plans() {  # model ctx
  dec auto $1 $2
  dec none $1 $2 --no-prefetch
  dec autoU $1 $2 --prefetch-o $G --prefetch-unwaited
  dec down8 $1 $2 --prefetch-o --prefetch-down-mib 8 $G
  dec qkv8 $1 $2 --prefetch-o --prefetch-qkv-mib 8 $G
  dec allW $1 $2 --prefetch-o-beside-qkv --prefetch-ffn-mib 8 --prefetch-ffn-mib-beside-o 8 --prefetch-down-mib 8 --prefetch-qkv-mib 8 $G
  dec allU $1 $2 --prefetch-o-beside-qkv --prefetch-ffn-mib 8 --prefetch-ffn-mib-beside-o 8 --prefetch-down-mib 8 --prefetch-qkv-mib 8 $G --prefetch-unwaited
  dec allU16 $1 $2 --prefetch-o-beside-qkv --prefetch-ffn-mib 16 --prefetch-ffn-mib-beside-o 16 --prefetch-down-mib 16 --prefetch-qkv-mib 16 $G --prefetch-unwaited
}
synth() { timeout 90 $B/kvtrie-synth --preset $1 --type $2 --threads 14 -o /tmp/models/$1-$2.gguf > /dev/null 2>&1; echo "synth $1 $2 rc=$?"; }
mkdir -p /tmp/models
if [[ "$GPU" == *H200* ]]; then
  PEER_DIR=$P STEPS="limits models" PRESETS="llama3-8b llama3-1b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
    MODELS_DIR=/tmp/rdmodels timeout 380 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
  echo "run_device rc=$?"; grep -v "^\s*$" /tmp/rd/summary.md | head -40
  tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
  synth llama3-8b Q4_0
  q4_plans llama3-8b-Q4_0 512
else
  synth llama3-8b Q4_0; synth llama3-8b Q8_0
  for round in 1 2; do q4_plans llama3-8b-Q4_0 512; q8_plans llama3-8b-Q8_0 512; done
  dec auto llama3-8b-Q4_0 4096; dec allU llama3-8b-Q4_0 4096 --prefetch-o-beside-qkv --prefetch-ffn-mib 16 --prefetch-ffn-mib-beside-o 8 --prefetch-down-mib 8 --prefetch-qkv-mib 8 $G --prefetch-unwaited
  rm -f /tmp/models/*.gguf
  mkdir -p /tmp/dr && timeout 90 $B/kvtrie-bench disk-read --dir /tmp/dr --pages 511 --readers 16,64,128,256 2>>$OUT/bench.err | tee $OUT/disk_read.jsonl | cut -c1-300
fi
echo done

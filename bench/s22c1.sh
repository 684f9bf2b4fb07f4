#!/usr/bin/env bash
# Session 22, call 1: the K-quant unit with integer scales and exact_float (new) against d8560fd (old):
# sweep-matvec of Q4_K's decode products (old, new, new's loads-only probe), whole decode alternately
# (8B Q4_K 512/4096, Q4_0 512 at 1 and 8 sequences), a Q4_K profile; attention_decode's probes at 512/4096.
R=$PWD
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/w && cd /tmp/w && tar xJf $R/.device/bin.tar.xz && tar xJf $R/.device/old.tar.xz
B=/tmp/w/BIN; O=/tmp/w/OLD
export LD_LIBRARY_PATH=$B/lib
cat $B/COMMIT; nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p /tmp/models
(timeout 150 $B/kvtrie-synth --preset llama3-8b --type Q4_K --threads 14 -o /tmp/models/q4k.gguf &&
 timeout 150 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 14 -o /tmp/models/q40.gguf) > $OUT/synth.log 2>&1 &
SP=$!
S=$OUT/sweep_matvec.jsonl
sw() { local lab=$1 bin=$2; shift 2; timeout 120 $bin/kvtrie-bench sweep-matvec --model llama3-8b --tokens 1 --variants q8i "$@" 2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"label\":\"$lab\",/" >> $S; }
sw old $O --types Q4_K --rows-per-lane 1,4 --workgroups 128,512
sw new $B --types Q4_K --rows-per-lane 1,4 --workgroups 128,512
sw nodot $B --types Q4_K --rows-per-lane 1,4 --workgroups 128,512 --probe nodot
sw old_sw $O --types Q4_K --rows-per-lane 1,4 --workgroups 512 --mode norm_swiglu
sw new_sw $B --types Q4_K --rows-per-lane 1,4 --workgroups 512 --mode norm_swiglu
sw nodot_sw $B --types Q4_K --rows-per-lane 1,4 --workgroups 512 --mode norm_swiglu --probe nodot
sw old_t8 $O --types Q4_K,Q4_0 --tokens 8 --rows-per-lane 1,4 --workgroups 512
sw new_t8 $B --types Q4_K,Q4_0 --tokens 8 --rows-per-lane 1,4 --workgroups 512
python3 - $S <<'PY'
import json,sys
for l in open(sys.argv[1]):
  r=json.loads(l)
  if r.get("variant")=="legacy": continue
  print(r["label"], r.get("type"), r.get("shape"), r.get("tokens"), r.get("variant"), round(r["us"],2), round(r.get("weight_gbs",0)))
PY
A=$OUT/sweep_attention.jsonl
timeout 100 $B/kvtrie-bench sweep-attention --model llama3-8b --contexts 512,4096 --sequences 1 --variants decode,decode_probe1,decode_probe2,decode_probe5 --splits 64,128,256,512 2>>$OUT/bench.err | grep '^{' > $A
python3 - $A <<'PY'
import json,sys
for l in open(sys.argv[1]):
  r=json.loads(l); print(r["context"], r["variant"], r["split"], round(r["us"],2), round(r["split_us"],2), round(r["combine_us"],2))
PY
wait $SP; echo synth rc=$?
J=$OUT/decode.jsonl
dec() {  # label bin model ctx seqs [extra]
  local lab=$1 bin=$2 m=$3 c=$4 n=$5; shift 5
  timeout 60 $bin/kvtrie-bench decode --model $m --context $c --sequences $n --tokens 64 --read-bandwidth 2.87e12 "$@" \
    2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"label\":\"$lab\",/" | tee -a $J | python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["bench"]=="decode": print(r["label"], r["model"], r["context"], r["sequences"], round(r["tok_s"],1))'
}
for i in 1 2 3; do
  dec old $O /tmp/models/q4k.gguf 512 1; dec new $B /tmp/models/q4k.gguf 512 1
done
for i in 1 2; do
  dec old $O /tmp/models/q4k.gguf 4096 1; dec new $B /tmp/models/q4k.gguf 4096 1
  dec old $O /tmp/models/q40.gguf 512 1; dec new $B /tmp/models/q40.gguf 512 1
  dec old $O /tmp/models/q40.gguf 512 8; dec new $B /tmp/models/q40.gguf 512 8
  dec old $O /tmp/models/q4k.gguf 512 8; dec new $B /tmp/models/q4k.gguf 512 8
done
timeout 90 $B/kvtrie-bench decode --model /tmp/models/q4k.gguf --context 512 --sequences 1 --tokens 32 --read-bandwidth 2.87e12 --profile --shader-stats 2>>$OUT/bench.err | grep '^{' > $OUT/profile_q4k_new.jsonl
timeout 60 $O/kvtrie-bench decode --model /tmp/models/q4k.gguf --context 512 --sequences 1 --tokens 32 --read-bandwidth 2.87e12 --profile --shader-stats 2>>$OUT/bench.err | grep '^{' > $OUT/profile_q4k_old.jsonl
python3 - $OUT/profile_q4k_old.jsonl $OUT/profile_q4k_new.jsonl <<'PY'
import json,sys
for f in sys.argv[1:]:
  ops=set()
  for l in open(f):
    r=json.loads(l)
    if r["bench"]=="decode_profile":
      print(f.split("/")[-1], r["op"], r.get("dispatches"), round(r.get("ms", r.get("gpu_ms")),3)); ops.add(r["op"])
  for l in open(f):
    r=json.loads(l)
    if r["bench"]=="shader_stats" and r.get("pipeline") in ops and r.get("stat")=="Register Count": print(f.split("/")[-1], r["pipeline"], r["spec"], "regs", r["value"])
PY
tail -3 $OUT/bench.err

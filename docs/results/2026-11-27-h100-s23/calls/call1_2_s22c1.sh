#!/usr/bin/env bash
# Session 22's unmeasured changes (branch s22-unmeasured), the first two calls of a session that has device
# time: BIN = this branch, OLD = main's kvtrie-bench (61e45da), L16 = this branch with Q4_K's one-token SwiGLU
# product in 16 lanes of a row (matvec_q8_shape) as Q4_0's. Run from the repository root with .gl and .device
# (bin.tar.xz, old.tar.xz with OLD/ and L16/) carried, in two calls of about 5 minutes each:
#   bench/s22c1.sh attention   (1, 2 and the lanes-a-key decode rows of 4)
#   bench/s22c1.sh kquant      (3 and the Q4_K rows of 4)
#   1. GPU tests of the new code: attention (KEY_LANES 2 and 4 on the d64/d128 builds; in `attention`), and in
#      `kquant` matvec_q8 (Q4_K/Q5_K), vk_runtime (the spinning wait), GpuModel (logits written to host memory)
#      and the engine (sampling the logits in place);
#   2. sweep-attention: the engine's decode pass against KEY_LANES 2 and 4, with 8 and 16 subgroups, at 512-8192;
#   3. sweep-matvec of Q4_K's one-token products: main, this branch, this branch's loads-only probe;
#   4. whole decode, alternately: 8B Q4_K at 512 / 4096 (OLD, BIN, L16), Q4_0 at 1 and 8 sequences (exact_float
#      is bit-identical there: speed only), Q4_0 at 512 / 4096 with 1, 2, 4 lanes a key (--attention-key-lanes),
#      8B and 1B Q4_0 with the logits written to host memory by their product or copied (--logits-copy), and
#      forward() blocking on the fence at once instead of polling it first (--blocking-wait);
#      a Q4_K profile with registers.
R=$PWD
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/w && cd /tmp/w && tar xJf $R/.device/bin.tar.xz && tar xJf $R/.device/old.tar.xz
B=/tmp/w/BIN; O=/tmp/w/OLD; L=/tmp/w/L16
export LD_LIBRARY_PATH=$B/lib
cat $B/COMMIT; nvidia-smi --query-gpu=name --format=csv,noheader
PART=${1:?attention or kquant}
mkdir -p /tmp/models
if [ "$PART" = attention ]; then TYPE=Q4_0; M=/tmp/models/q40.gguf; else TYPE=Q4_K; M=/tmp/models/q4k.gguf; fi
(timeout 150 $B/kvtrie-synth --preset llama3-8b --type $TYPE --threads 14 -o $M &&
 if [ "$PART" = attention ]; then timeout 60 $B/kvtrie-synth --preset llama3-1b --type Q4_0 --threads 14 -o /tmp/models/1q40.gguf; fi) > $OUT/synth.log 2>&1 &
SP=$!
J=$OUT/decode.jsonl
dec() {  # label bin model ctx seqs [extra]
  local lab=$1 bin=$2 m=$3 c=$4 n=$5; shift 5
  timeout 60 $bin/kvtrie-bench decode --model $m --context $c --sequences $n --tokens 64 --read-bandwidth 2.87e12 "$@" \
    2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"label\":\"$lab\",/" | tee -a $J | python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["bench"]=="decode": print(r["label"], r["model"], r["context"], r["sequences"], round(r["tok_s"],1))'
}
if [ "$PART" = attention ]; then
timeout 150 $B/kernels_test_attention --gtest_brief=1 --gtest_filter='*LanesSharing*:*DecodePass*:*PositionSplits*' > $OUT/test_attention.log 2>&1; echo attention tests rc=$?; tail -3 $OUT/test_attention.log
A=$OUT/sweep_attention.jsonl
timeout 120 $B/kvtrie-bench sweep-attention --model llama3-8b --contexts 512,2048,4096,8192 --sequences 1 --variants decode,decode_kl2,decode_kl4,decode_p16_kl2,decode_p16vk4_kl2,decode_p16_kl4,decode_p16vk4_kl4 --splits 64,128,256,512 --merge-in-pass 2>>$OUT/bench.err | grep '^{' > $A
python3 - $A <<'PY'
import json,sys
for l in open(sys.argv[1]):
  r=json.loads(l); print(r["context"], r["variant"], r["split"], round(r["us"],2), round(r["split_us"],2), round(r["combine_us"],2))
PY
wait $SP; echo synth rc=$?
for c in 512 4096; do
  for kl in 1 2 4 1 2 4; do dec kl$kl $B $M $c 1 --attention-key-lanes $kl; done
done
dec old $O $M 512 1; dec new $B $M 512 1; dec old $O $M 512 8; dec new $B $M 512 8
for i in 1 2; do  # the logits written to host memory by their product, or copied there (--logits-copy)
  dec direct $B $M 512 1; dec copy $B $M 512 1 --logits-copy; dec block $B $M 512 1 --blocking-wait
  dec direct $B /tmp/models/1q40.gguf 512 1; dec copy $B /tmp/models/1q40.gguf 512 1 --logits-copy
  dec block $B /tmp/models/1q40.gguf 512 1 --blocking-wait
done
exit 0
fi
for t in kernels_test_matvec_q8 kernels_test_vk_runtime runner_test_gpu_model runner_test_gpu_engine; do
  timeout 150 $B/$t --gtest_brief=1 > $OUT/$t.log 2>&1; echo $t rc=$?; tail -3 $OUT/$t.log
done
S=$OUT/sweep_matvec.jsonl
sw() { local lab=$1 bin=$2; shift 2; timeout 90 $bin/kvtrie-bench sweep-matvec --model llama3-8b --tokens 1 --variants q8i "$@" 2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"label\":\"$lab\",/" >> $S; }
sw old $O --types Q4_K --rows-per-lane 1,4 --workgroups 128,512
sw new $B --types Q4_K --rows-per-lane 1,4 --workgroups 128,512
sw nodot $B --types Q4_K --rows-per-lane 1,4 --workgroups 128,512 --probe nodot
sw old_sw $O --types Q4_K --rows-per-lane 1,4 --workgroups 512 --mode norm_swiglu
sw new_sw $B --types Q4_K --rows-per-lane 1,4 --workgroups 512 --mode norm_swiglu
sw nodot_sw $B --types Q4_K --rows-per-lane 1,4 --workgroups 512 --mode norm_swiglu --probe nodot
python3 - $S <<'PY'
import json,sys
for l in open(sys.argv[1]):
  r=json.loads(l)
  if r.get("variant")=="legacy": continue
  print(r["label"], r.get("type"), r.get("shape"), r.get("variant"), round(r["us"],2), round(r.get("weight_gbs",0)))
PY
wait $SP; echo synth rc=$?
for i in 1 2 3; do
  dec old $O $M 512 1; dec new $B $M 512 1; dec l16 $L $M 512 1
done
for i in 1 2; do
  dec old $O $M 4096 1; dec new $B $M 4096 1; dec l16 $L $M 4096 1
done
dec old $O $M 512 8; dec new $B $M 512 8
timeout 60 $B/kvtrie-bench decode --model /tmp/models/q4k.gguf --context 512 --sequences 1 --tokens 32 --read-bandwidth 2.87e12 --profile --shader-stats 2>>$OUT/bench.err | grep '^{' > $OUT/profile_q4k_new.jsonl
python3 - $OUT/profile_q4k_new.jsonl <<'PY'
import json,sys
ops=set()
for l in open(sys.argv[1]):
  r=json.loads(l)
  if r["bench"]=="decode_profile": print(r["op"], r.get("dispatches"), round(r.get("ms", r.get("gpu_ms")),3)); ops.add(r["op"])
for l in open(sys.argv[1]):
  r=json.loads(l)
  if r["bench"]=="shader_stats" and r.get("pipeline") in ops and r.get("stat")=="Register Count": print(r["pipeline"], r["spec"], "regs", r["value"])
PY
tail -3 $OUT/bench.err

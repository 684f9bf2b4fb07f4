#!/usr/bin/env bash
# Session 24, call 4: matvec_q8's Q4_K/Q5_K units in pairs (both halves of a sub-block pair a thread step: one
# head load and one scale decode; BIN, 4eedf5f+dirty) against main before it (OLD, 96bdb99), alternately on
# the same files: GPU tests of the new build, sweep-matvec of Q4_K's one-token products, whole decode of 8B
# Q4_K; then the Q8_0 prefetch rule on the new build (default against --no-prefetch). On an H200 the table
# (run_device.sh, no http) first.
R=$PWD
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/w /tmp/o && cd /tmp/w && tar xJf $R/.device/bin.tar.xz && tar xJf $R/.device/llamacpp-peer.tar.xz
cd /tmp/o && tar xJf $R/.device/old.tar.xz
B=/tmp/w/BIN; O=/tmp/o/BIN; P=/tmp/w/llamacpp-peer
export LD_LIBRARY_PATH=$B/lib
cat $B/COMMIT $O/COMMIT; GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
M=/tmp/m2; mkdir -p $M
(timeout 90 $B/kvtrie-synth --preset llama3-8b --type Q4_K --threads 8 -o $M/q4k.gguf;
 timeout 90 $B/kvtrie-synth --preset llama3-8b --type Q8_0 --threads 8 -o $M/q80.gguf) > $OUT/synth.log 2>&1 &
SP=$!
cd $R
if [[ "$GPU" == *H200* ]]; then
  PEER_DIR=$P STEPS="limits models" PRESETS="llama3-8b llama3-1b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
    MODELS_DIR=/tmp/models timeout 330 bench/run_device.sh $B /tmp/rd > /tmp/rd.out 2>&1
  echo "run_device rc=$?"; grep -v "^\s*$" /tmp/rd/summary.md | head -36
  tar czf $OUT/rd.tar.gz -C /tmp rd 2>/dev/null
else
  for t in kernels_test_matvec_q8 runner_test_gpu_model runner_test_gpu_engine; do
    timeout 100 $B/$t --gtest_brief=1 > $OUT/$t.log 2>&1; echo $t rc=$?; tail -2 $OUT/$t.log
  done
  S=$OUT/sweep_matvec.jsonl
  sw() { local lab=$1 bin=$2; shift 2; timeout 60 $bin/kvtrie-bench sweep-matvec --model llama3-8b --tokens 1 --variants q8i "$@" 2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"label\":\"$lab\",/" >> $S; }
  sw old $O --types Q4_K --rows-per-lane 1,4 --workgroups 128,512
  sw new $B --types Q4_K --rows-per-lane 1,4 --workgroups 128,512
  sw old_sw $O --types Q4_K --rows-per-lane 1,4 --workgroups 128,512 --mode norm_swiglu
  sw new_sw $B --types Q4_K --rows-per-lane 1,4 --workgroups 128,512 --mode norm_swiglu
  python3 - $S <<'PY'
import json,sys
for l in open(sys.argv[1]):
  r=json.loads(l)
  if r.get("variant")=="legacy": continue
  print(r["label"], r.get("shape"), r.get("variant"), round(r["us"],2))
PY
fi
wait $SP; ls $M
dec() {  # label bin model ctx seqs [extra]
  local lab=$1 bin=$2 m=$M/$3.gguf c=$4 n=$5; shift 5
  timeout 40 $bin/kvtrie-bench decode --model $m --context $c --sequences $n --tokens 64 "$@" 2>>$OUT/bench.err |
    grep '^{' | sed "s/^{/{\"label\":\"$lab\",/" | tee -a $OUT/decode.jsonl | python3 -c 'import json,sys
for l in sys.stdin:
  r=json.loads(l)
  if r["bench"]=="decode": print(r["label"], r["model"], r["context"], r["sequences"], round(r["tok_s"],1))'
}
for i in 1 2 3; do dec old $O q4k 512 1; dec new $B q4k 512 1; done
for i in 1 2; do dec old $O q4k 4096 1; dec new $B q4k 4096 1; done
dec old $O q4k 512 8; dec new $B q4k 512 8
for i in 1 2 3; do dec rule $B q80 512 1; dec none $B q80 512 1 --no-prefetch; done
timeout 40 $B/kvtrie-bench decode --model $M/q4k.gguf --context 512 --sequences 1 --tokens 32 --profile --shader-stats 2>>$OUT/bench.err | grep '^{' > $OUT/profile_q4k_new.jsonl
python3 - $OUT/profile_q4k_new.jsonl <<'PY'
import json,sys
ops=set()
rows=[json.loads(l) for l in open(sys.argv[1])]
for r in rows:
  if r["bench"]=="decode_profile": print(r["op"], r.get("dispatches"), round(r.get("ms", r.get("gpu_ms") or 0),3)); ops.add(r["op"])
for r in rows:
  if r["bench"]=="shader_stats" and r.get("pipeline") in ops and r.get("stat")=="Register Count": print(r["pipeline"], r.get("spec"), "regs", r["value"])
PY
echo done

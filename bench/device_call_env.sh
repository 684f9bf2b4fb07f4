# Sourced at the start of a device call's script (the device tool runs it in the repository root, with
# .gl and .device carried): installs the Vulkan loader from .gl, unpacks the packed build
# (.device/bin.tar.xz, bench/pack_device_bin.sh) into $B, a second one (.device/old.tar.xz) into $B_OLD
# when present, and llama.cpp's peer (.device/llamacpp-peer.tar.xz) into $P; sets R (the repository),
# VK_DRIVER_FILES, LD_LIBRARY_PATH (the build's libraries) and GPU (the card's name), and prints the
# build's commit and the card.
R=$PWD
for f in "$R"/.gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/w /tmp/w-old
tar -C /tmp/w -xJf "$R/.device/bin.tar.xz"
tar -C /tmp/w -xJf "$R/.device/llamacpp-peer.tar.xz"
B=/tmp/w/BIN
P=/tmp/w/llamacpp-peer
B_OLD=
if [ -f "$R/.device/old.tar.xz" ]; then
  tar -C /tmp/w-old -xJf "$R/.device/old.tar.xz"
  B_OLD=/tmp/w-old/BIN
fi
export LD_LIBRARY_PATH=$B/lib
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "build $(cat "$B/COMMIT")${B_OLD:+, old build $(cat "$B_OLD/COMMIT")}; $GPU"

# table_on_h200 [TIMEOUT_S]: when the card is an H200 (issue 16's Q8_0 row needs one, and few calls get it),
# bench/run_device.sh's table with the session-12 settings into /tmp/rd, kept as $OUT/rd.tar.gz, its summary
# printed; nothing on other cards. Call scripts run it first.
table_on_h200() {
  [[ "$GPU" == *H200* ]] || return 0
  PEER_DIR=$P STEPS="limits models" PRESETS="llama3-8b llama3-1b" TYPES="Q4_0 Q4_K Q8_0" PEER_REPS=2 PEER_TG=64 \
    MODELS_DIR=/tmp/models timeout "${1:-330}" bench/run_device.sh "$B" /tmp/rd >/tmp/rd.out 2>&1
  echo "run_device rc=$?"
  grep -v "^\s*$" /tmp/rd/summary.md | head -40
  tar czf "$OUT/rd.tar.gz" -C /tmp rd 2>/dev/null
}

# make_models NAME...: writes each llama3 synthetic model NAME (8b-Q4_0, 1b-Q8_0, ...) as $M/NAME.gguf in the
# background; wait_models waits for them.
M=/tmp/m
make_models() {
  mkdir -p $M
  (for n in "$@"; do
     timeout 120 $B/kvtrie-synth --preset llama3-${n%%-*} --type ${n#*-} --threads 8 -o $M/$n.gguf
   done) > /tmp/synth.log 2>&1 &
  MODELS_PID=$!
}
wait_models() { wait $MODELS_PID; tail -1 /tmp/synth.log; }

# dec BIN LABEL MODEL CONTEXT [ARGS...]: one `kvtrie-bench decode` of $M/MODEL.gguf (64 tokens unless ARGS
# say), its decode, decode_span, decode_profile and shader_stats rows labelled LABEL in $OUT/decode.jsonl.
dec() {
  local bin=$1 lab=$2 m=$M/$3.gguf c=$4
  shift 4
  timeout 60 $bin/kvtrie-bench decode --model $m --context $c --tokens 64 "$@" 2>/dev/null |
    grep -E '"(decode|shader_stats)' | sed "s/^{/{\"label\":\"$lab\",/" >> $OUT/decode.jsonl
}

# decode_summary: $OUT/decode.jsonl's tok/s by (model, context, sequences), one list a label, and its profiles.
decode_summary() {
  python3 - $OUT/decode.jsonl <<'PY'
import collections, json, sys
t = collections.OrderedDict()
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["bench"] == "decode":
        key = (r["model"], r["context"], r["sequences"])
        t.setdefault(key, collections.OrderedDict()).setdefault(r["label"], []).append(round(r["tok_s"], 1))
    elif r["bench"] == "decode_profile":
        print(r["label"], r["op"], r["dispatches"], round(r.get("ms", r.get("gpu_ms", 0)), 3), r.get("wall_ms", ""))
for k, d in t.items():
    print(k, "  ".join("%s %s" % (lab, v) for lab, v in d.items()))
PY
}

# sw BIN LABEL [ARGS...]: `kvtrie-bench sweep-matvec` of llama3-8b's one-token products (q8i), its rows
# labelled LABEL in $OUT/sweep.jsonl; sweep_summary prints microseconds by (type, shape, independent) and
# variant.
sw() {
  local bin=$1 lab=$2
  shift 2
  timeout 100 $bin/kvtrie-bench sweep-matvec --model llama3-8b --variants q8i --tokens 1 "$@" 2>/dev/null |
    sed "s/^{/{\"label\":\"$lab\",/" >> $OUT/sweep.jsonl
}
sweep_summary() {
  python3 - $OUT/sweep.jsonl <<'PY'
import collections, json, sys
by = collections.OrderedDict()
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    r = json.loads(l)
    if r["variant"] == "legacy": continue
    lab = r["variant"] if r["variant"].startswith("read") else r["label"]
    key = (r["type"], r["shape"], r.get("independent", 0))
    by.setdefault(key, collections.OrderedDict()).setdefault(lab, []).append(r["us"])
for key, d in by.items():
    print(key, "  ".join("%s %s" % (k, "/".join("%.2f" % x for x in v)) for k, v in d.items()))
PY
}

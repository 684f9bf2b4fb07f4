#!/usr/bin/env bash
# The benchmark sweep for an NVIDIA GPU machine (docs/BENCHMARKS.md): kvtrie's own measurements and, with
# PEER_DIR, llama.cpp's on the same GGUF files in the same run. Nothing is compiled there: the binaries come
# from a build elsewhere.
#   [PEER_DIR=/path/to/llamacpp-peer] bench/run_device.sh BIN_DIR OUT_DIR
# BIN_DIR holds kvtrie, kvtrie-bench, kvtrie-synth and the GPU test binaries (GPU_TESTS below, as
# bench/pack_device_bin.sh packs them); BIN_DIR/lib
# (optional) holds shared libraries the machine lacks (put first on LD_LIBRARY_PATH); BIN_DIR/COMMIT
# (optional) names the kvtrie commit they were built from (else KVTRIE_COMMIT, else git here, else "unknown").
# PEER_DIR is the unpacked llamacpp-peer folder (../shared/peer): peerbench and server/llama-server.
# OUT_DIR gets bench.log (everything), results.jsonl (one JSON object per measurement, llama.cpp's rows with
# "engine": "llama.cpp"), side_by_side.jsonl (kvtrie beside llama.cpp, one row per measure), summary.md, and
# from the HTTP step the servers' logs and per-request rows (http-*.log, http-*-requests.jsonl).
# Environment:
#   STEPS      which parts run (default "tests limits models multiturn http"): tests = the GPU test binaries,
#              limits = bandwidth/kernel/copy, models = load/prefill/decode per model (+ peerbench),
#              multiturn = kvtrie-bench multiturn (engine, no HTTP), http = the HTTP multi-turn step (both
#              servers; llama.cpp's only with PEER_DIR). MULTITURN=0 drops "multiturn".
#   PRESETS / TYPES / MULTI_MODEL   which models (default llama3-1b llama3-8b / Q4_0 Q4_K Q8_0 (add F16 to
#              TYPES for it) / "llama3-8b Q4_0": the model of the decode 8/32, multiturn and http steps).
#   LONG       the long prompt and context (default 4096: prefill 4096, decode at context 4096).
#   PAR_SEQUENCES   the multi model's decode-together sizes (default "8 32").
#   QUICK=1    a smaller sweep; READ_BW bytes/s for the decode bound (default: the limits step's measured
#              shader read bandwidth when it runs, else 4.44e12, the spec's H200
#              read-only figure); MODELS_DIR scratch for synthetic models (default /tmp/kvtrie-models).
#   PEER_NGL (99), PEER_TG (128), PEER_REPS (3), PEER_TIMEOUT (300 s per peerbench run).
#   HTTP_CONVERSATIONS (32) HTTP_TURNS (5) HTTP_SYSTEM (2048) HTTP_USER (256) HTTP_ANSWER (128)
#   HTTP_CLIENTS (8) HTTP_SLOTS (8) HTTP_CTX (8192 tokens per slot) HTTP_DEADLINE (240 s per server);
#   HTTP_KVTRIE_ARGS: more llama-server flags for kvtrie's server (e.g. "-b 512");
#   QUICK=1 makes the HTTP workload 8 conversations x 3 turns unless set; HTTP_STREAM=0 for non-streaming
#   requests (TTFT from the servers' timings instead of the client's clock).
# e.g. a try on lavapipe: STEPS="models http" PRESETS=tiny TYPES=Q8_0 MULTI_MODEL="tiny Q8_0" QUICK=1 LONG=200
# PAR_SEQUENCES="2 4" HTTP_SYSTEM=32 HTTP_USER=16 HTTP_ANSWER=8 HTTP_CTX=256 (docs/BENCHMARKS.md has it all).
# Every step runs under `timeout` and a failure is logged, never fatal: the sweep goes on.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$(cd "${1:?usage: run_device.sh BIN_DIR OUT_DIR}" && pwd)
OUT=${2:?usage: run_device.sh BIN_DIR OUT_DIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOG=$OUT/bench.log
RESULTS=$OUT/results.jsonl
MODELS=${MODELS_DIR:-/tmp/kvtrie-models}
READ_BW_GIVEN=${READ_BW:+1}
READ_BW=${READ_BW:-4.44e12}
QUICK=${QUICK:-0}
PRESETS=${PRESETS:-llama3-1b llama3-8b}
TYPES=${TYPES:-Q4_0 Q4_K Q8_0}
MULTI_MODEL=${MULTI_MODEL:-llama3-8b Q4_0}
LONG=${LONG:-4096}
PAR_SEQUENCES=${PAR_SEQUENCES:-8 32}
STEPS=${STEPS:-tests limits models multiturn http}
. "$HERE/gpu_tests.sh"  # GPU_TESTS: the tests step runs them all
[ "${MULTITURN:-1}" = 0 ] && STEPS=${STEPS//multiturn/}
PEER_DIR=${PEER_DIR:-}
PEER_NGL=${PEER_NGL:-99}
PEER_TG=${PEER_TG:-128}
PEER_REPS=${PEER_REPS:-3}
PEER_TIMEOUT=${PEER_TIMEOUT:-300}
COMMIT=${KVTRIE_COMMIT:-$(cat "$BIN/COMMIT" 2>/dev/null || git -C "$HERE" rev-parse --short HEAD 2>/dev/null ||
  echo unknown)}
mkdir -p "$MODELS"
: >"$RESULTS"
[ -d "$BIN/lib" ] && export LD_LIBRARY_PATH="$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset KVTRIE_VALIDATION  # validation layer off: measure and test the real driver paths
# A row naming the card (the daemon's first Vulkan device, where every step runs), so that a run without
# kvtrie-bench's rows (the http step alone) still says where it ran.
device=$("$BIN/kvtrie" --list-devices 2>/dev/null | sed -n 's/^  Vulkan0: \(.*\) ([0-9]* MiB, .*$/\1/p' | head -1)
[ -n "$device" ] && python3 -c 'import json, sys; print(json.dumps({"bench": "machine", "device": sys.argv[1]}))' \
  "$device" >>"$RESULTS"
START=$(date +%s)

log() { echo "[$(date -u +%H:%M:%S) +$(($(date +%s) - START))s] $*" | tee -a "$LOG"; }
has_step() { [[ " $STEPS " == *" $1 "* ]]; }

# step SECONDS NAME CMD...: runs CMD under timeout; stdout lines that are JSON go to results.jsonl, all
# output to bench.log. Returns 0 always.
FAILED=()
step() {
  local limit=$1 name=$2
  shift 2
  log "== $name: $*"
  local tmp
  tmp=$(mktemp)
  timeout --kill-after=10 "$limit" "$@" >"$tmp" 2>>"$LOG"
  local rc=$?
  cat "$tmp" >>"$LOG"
  grep '^{' "$tmp" >>"$RESULTS"
  rm -f "$tmp"
  if [ $rc -ne 0 ]; then
    FAILED+=("$name (rc=$rc)")
    log "!! $name failed rc=$rc$([ $rc -eq 124 ] && echo ' (timeout)')"
  fi
  return 0
}

# peer NAME MODEL [--only-parallel] PP TG REPS [PAR]: llama.cpp's peerbench on MODEL (a no-op without
# PEER_DIR). Its output goes to bench.log (less the model loader's per-tensor lines), its measurements,
# parsed by peer_rows.py, to results.jsonl. Returns 0 always.
peer() {
  [ -n "$PEER_DIR" ] || return 0
  local name=$1 model=$2 flags=()
  shift 2
  [ "$1" = --only-parallel ] && { flags=(--only-parallel); shift; }
  log "== peer $name: peerbench $model $PEER_NGL $*"
  local tmp rc
  tmp=$(mktemp)
  LD_LIBRARY_PATH="$PEER_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout --kill-after=10 "$PEER_TIMEOUT" \
    "$PEER_DIR/peerbench" "$model" "$PEER_DIR/lib" "$PEER_NGL" "$@" >"$tmp" 2>&1
  rc=$?
  grep -Ev '^(llama_model_loader: - |create_tensor: |print_info: |load_tensors: layer )' "$tmp" >>"$LOG"
  python3 "$HERE/peer_rows.py" --model "$model" "${flags[@]}" <"$tmp" >>"$RESULTS" ||
    { FAILED+=("peer $name (no result)"); log "!! peer $name: no result line"; }
  rm -f "$tmp"
  if [ $rc -ne 0 ]; then
    FAILED+=("peer $name (rc=$rc)")
    log "!! peer $name failed rc=$rc$([ $rc -eq 124 ] && echo ' (timeout)')"
  fi
  return 0
}

# synth PRESET TYPE: writes the model (if absent) and prints its path.
synth() {
  local path=$MODELS/$1-$2.gguf
  if [ ! -f "$path" ]; then
    log "-- writing $path" >&2
    timeout 300 "$BIN/kvtrie-synth" --preset "$1" --type "$2" --threads 0 -o "$path" >>"$LOG" 2>&1 ||
      { log "!! kvtrie-synth $1 $2 failed" >&2; rm -f "$path"; return 1; }
  fi
  echo "$path"
}

# stop_server PID NAME: SIGTERM, up to 20 s to exit, then SIGKILL; logs how it ended.
stop_server() {
  local pid=$1 name=$2 i
  kill -TERM "$pid" 2>/dev/null
  for ((i = 0; i < 40; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "!! $name did not exit 20 s after SIGTERM: killing it"
    FAILED+=("$name: no exit on SIGTERM")
    kill -KILL "$pid" 2>/dev/null
  fi
  wait "$pid" 2>/dev/null
  log "-- $name exited with status $?"
}

# http_multiturn MODEL: bench/http_multiturn.py with the same workload against kvtrie started as llama-server,
# then against llama.cpp's llama-server (PEER_DIR), each server started fresh on MODEL and stopped after.
HTTP_SLOTS=${HTTP_SLOTS:-8}
HTTP_CTX=${HTTP_CTX:-8192}
HTTP_DEADLINE=${HTTP_DEADLINE:-240}
http_multiturn() {
  local model=$1 label pid dir
  label=$(basename "$model" .gguf)
  local conversations=32 turns=5
  [ "$QUICK" = 1 ] && { conversations=8; turns=3; }
  local client=(python3 "$HERE/http_multiturn.py" --model "$label" --wait-ready 300 --deadline "$HTTP_DEADLINE"
    --conversations "${HTTP_CONVERSATIONS:-$conversations}" --turns "${HTTP_TURNS:-$turns}" --system "${HTTP_SYSTEM:-2048}"
    --user "${HTTP_USER:-256}" --answer "${HTTP_ANSWER:-128}" --clients "${HTTP_CLIENTS:-8}")
  [ "${HTTP_STREAM:-1}" = 0 ] && client+=(--no-stream)
  local limit=$((HTTP_DEADLINE + 480))  # + loading (--wait-ready 300), warm-up, the last requests (--timeout 120)

  # kvtrie's -c is per sequence, llama.cpp's for all slots together: both give each slot HTTP_CTX tokens.
  dir=$(mktemp -d)
  ln -s "$BIN/kvtrie" "$dir/llama-server"
  # shellcheck disable=SC2086 # HTTP_KVTRIE_ARGS: more llama-server flags for kvtrie, split on spaces
  "$dir/llama-server" --model "$model" --port 18001 --host 127.0.0.1 -c "$HTTP_CTX" -np "$HTTP_SLOTS" \
    ${HTTP_KVTRIE_ARGS:-} >"$OUT/http-kvtrie.log" 2>&1 &
  pid=$!
  step "$limit" "http multiturn kvtrie $label" "${client[@]}" --url http://127.0.0.1:18001 --label kvtrie \
    --wait-pid "$pid" --requests-out "$OUT/http-kvtrie-requests.jsonl"
  stop_server "$pid" "kvtrie llama-server"
  rm -rf "$dir"

  [ -n "$PEER_DIR" ] || return 0
  (cd "$PEER_DIR" && LD_LIBRARY_PATH="$PEER_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec ./server/llama-server \
    -m "$model" --port 18002 --host 127.0.0.1 -ngl "$PEER_NGL" -np "$HTTP_SLOTS" -c $((HTTP_CTX * HTTP_SLOTS)) \
    -fa on --no-webui) >"$OUT/http-llamacpp.log" 2>&1 &
  pid=$!
  step "$limit" "http multiturn llama.cpp $label" "${client[@]}" --url http://127.0.0.1:18002 --label llama.cpp \
    --wait-pid "$pid" --requests-out "$OUT/http-llamacpp-requests.jsonl"
  stop_server "$pid" "llama.cpp llama-server"
}

log "kvtrie benchmark sweep: $(hostname) $(date -u +%Y-%m-%dT%H:%M:%SZ) BIN=$BIN OUT=$OUT READ_BW=$READ_BW"
log "commit $COMMIT; steps: $STEPS; peer: ${PEER_DIR:-none}"
if [ -n "$PEER_DIR" ] && [ ! -x "$PEER_DIR/peerbench" ]; then
  log "!! PEER_DIR=$PEER_DIR has no executable peerbench: llama.cpp is left out"
  FAILED+=("peer missing in $PEER_DIR")
  PEER_DIR=
fi
[ -n "$PEER_DIR" ] && PEER_DIR=$(cd "$PEER_DIR" && pwd)
{
  uname -a
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv 2>&1 || true
  command -v vulkaninfo >/dev/null && vulkaninfo --summary 2>&1 | head -60
  df -h /tmp 2>&1 | tail -1
  nproc
  for b in kvtrie kvtrie-bench kvtrie-synth $GPU_TESTS; do
    [ -x "$BIN/$b" ] || { echo "missing binary: $b"; continue; }
    ldd "$BIN/$b" | grep 'not found' | sed "s/^/$b: /"
  done
} >>"$LOG" 2>&1

# 1. Kernel and engine tests on the real GPU (cooperative-matrix and other device paths vs CPU references).
if has_step tests; then
  for t in $GPU_TESTS; do
    if [ -x "$BIN/$t" ]; then
      step 300 "test $t" "$BIN/$t" --gtest_brief=1  # matmul compiles its many tiles on a fresh machine: ~130 s
    else
      log "!! missing $BIN/$t"
      FAILED+=("missing $t")
    fi
  done
fi

B=$BIN/kvtrie-bench
TOKENS=32
PREFILL_REPEATS=3
[ "$QUICK" = 1 ] && { TOKENS=16; PREFILL_REPEATS=2; }

# 2. Device limits first (no model needed): copy-engine and shader read bandwidth, page copies, and single
# matrix products of llama3-8b shapes (per-dispatch time, chained as in a forward pass and independent).
if has_step limits; then
  step 60 "bandwidth" "$B" bandwidth --mib "${BW_MIB:-2048}"
  # The decode bound uses the read bandwidth measured here unless READ_BW was given.
  if [ -z "$READ_BW_GIVEN" ]; then
    measured=$(grep '"bench":"bandwidth"' "$RESULTS" | tail -1 |
      python3 -c 'import json, sys; print(json.loads(sys.stdin.read())["read_bytes_per_s"])' 2>/dev/null || true)
    if [ -n "$measured" ]; then
      READ_BW=$measured
      log "decode bound from the read bandwidth measured here: $READ_BW bytes/s"
    fi
  fi
  for spec in "auto 4096 4096 1" "auto 14336 4096 1" "auto 4096 14336 1" "auto 4096 4096 32" "auto 4096 4096 512" \
              "tiled 4096 4096 512"; do
    read -r path rows cols tokens <<<"$spec"
    step 60 "kernel $spec" "$B" kernel --type Q4_0 --path "$path" --rows "$rows" --cols "$cols" --tokens "$tokens" \
      --dispatches 32
  done
  step 90 "copy" "$B" copy --pages "${COPY_PAGES:-1024}" --batch 256
fi

# 3. Per model: load, prefill 512 and LONG, decode 1 sequence at context 512 and LONG, then peerbench on the
# same file (pp512 + tg128 at context 512; pp LONG + tg128 at context LONG: peerbench decodes right after
# its prompt). The multi model adds decode of 8 and 32 sequences (both engines), the engine multiturn and the
# HTTP multiturn. Each model is written right before use and deleted after (llama3-8b F16 is 16 GB).
for preset in $PRESETS; do
  for type in $TYPES; do
    [ "$QUICK" = 1 ] && [ "$type" = F16 ] && [ "$preset" = llama3-8b ] && continue
    multi=0
    [ "$preset $type" = "$MULTI_MODEL" ] && multi=1
    has_step models || { [ $multi = 1 ] && { has_step multiturn || has_step http; }; } || continue
    m=$(synth "$preset" "$type") || { FAILED+=("synth $preset $type"); continue; }
    name="$preset $type"
    if has_step models; then
      step 120 "load $name" "$B" load --model "$m" --repeats 2 --warmup 0
      step 90 "prefill512 $name" "$B" prefill --model "$m" --prompt 512 --repeats "$PREFILL_REPEATS" --profile
      # The long prompt is attention-bound and slow (H200 llama3-1b Q4_0: 2.2 s a run): one timed run after one
      # warm-up.
      step 120 "prefill$LONG $name" "$B" prefill --model "$m" --prompt "$LONG" --repeats 1 --warmup 1
      step 90 "decode1 $name" "$B" decode --model "$m" --context 512 --sequences 1 --tokens "$TOKENS" \
        --read-bandwidth "$READ_BW" --profile
      step 90 "decode1 ctx$LONG $name" "$B" decode --model "$m" --context "$LONG" --sequences 1 --tokens "$TOKENS" \
        --read-bandwidth "$READ_BW"
      peer "pp512 tg$PEER_TG $name" "$m" 512 "$PEER_TG" "$PEER_REPS"
      peer "pp$LONG tg$PEER_TG $name" "$m" "$LONG" "$PEER_TG" "$PEER_REPS"
      if [ $multi = 1 ]; then
        for n in $PAR_SEQUENCES; do
          step 120 "decode$n $name" "$B" decode --model "$m" --context 512 --sequences "$n" --tokens "$TOKENS" \
            --read-bandwidth "$READ_BW"
          peer "par$n $name" "$m" --only-parallel 512 16 1 "$n"
        done
      fi
    fi
    # Multi-turn in the engine at the issue's size: 32 conversations x 5 turns on a 2048-token system prompt,
    # 256-token user turns, 128-token answers. For llama3-8b (2 MiB pages of 16 tokens) the 4 GiB device tier
    # holds 32k tokens, less than the working set (~64k), so the oldest conversations are demoted and the
    # host-hit probe finds its prefix in host memory. It takes several minutes.
    if [ $multi = 1 ] && has_step multiturn; then
      step 590 "multiturn $name" "$B" multiturn --model "$m" --conversations 32 --turns 5 --system 2048 \
        --user 256 --answer 128 --parallel 16 --kv-device-mib 4096 --kv-host-mib 16384
    fi
    [ $multi = 1 ] && has_step http && http_multiturn "$m"
    rm -f "$m"
  done
done

# 4. Side-by-side rows and the summary.
python3 "$HERE/sweep_report.py" "$RESULTS" --side-by-side "$OUT/side_by_side.jsonl" --commit "$COMMIT" \
  >"$OUT/summary.md" 2>>"$LOG" || { log "!! summary failed"; FAILED+=("summary"); }
log "done in $(($(date +%s) - START)) s; failures: ${#FAILED[@]}"
for f in "${FAILED[@]}"; do log "   failed: $f"; done
tee -a "$LOG" <"$OUT/summary.md"

#!/usr/bin/env bash
# The benchmark sweep for an NVIDIA GPU machine (docs/BENCHMARKS.md). Nothing is compiled there: the
# binaries come from a build elsewhere.
#   bench/run_device.sh BIN_DIR OUT_DIR
# BIN_DIR holds kvtrie-bench, kvtrie-synth and the test binaries kernels_test_matmul, kernels_test_matvec,
# kernels_test_attention, runner_test_gpu_engine; BIN_DIR/lib (optional) holds shared libraries the machine
# lacks (it is put first on LD_LIBRARY_PATH). OUT_DIR gets bench.log (everything), results.jsonl (one JSON
# object per measurement) and summary.md.
# Environment: READ_BW (bytes/s for the decode bound, default 4.44e12, the spec's H200 read-only figure),
# MODELS_DIR (scratch for synthetic models, default /tmp/kvtrie-models), QUICK=1 (a smaller sweep),
# PRESETS / TYPES / MULTI_MODEL (which models; e.g. PRESETS=tiny MULTI_MODEL="tiny Q8_0" to try the script).
# Every step runs under `timeout` and a failure is logged, never fatal: the sweep goes on.
set -u
BIN=$(cd "${1:?usage: run_device.sh BIN_DIR OUT_DIR}" && pwd)
OUT=${2:?usage: run_device.sh BIN_DIR OUT_DIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOG=$OUT/bench.log
RESULTS=$OUT/results.jsonl
MODELS=${MODELS_DIR:-/tmp/kvtrie-models}
READ_BW=${READ_BW:-4.44e12}
QUICK=${QUICK:-0}
PRESETS=${PRESETS:-llama3-1b llama3-8b}
TYPES=${TYPES:-Q4_0 Q8_0 F16}
MULTI_MODEL=${MULTI_MODEL:-llama3-8b Q4_0}  # the model of the decode 8/32 and multiturn steps
mkdir -p "$MODELS"
: >"$RESULTS"
[ -d "$BIN/lib" ] && export LD_LIBRARY_PATH="$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset KVTRIE_VALIDATION  # validation layer off: measure and test the real driver paths
START=$(date +%s)

log() { echo "[$(date -u +%H:%M:%S) +$(($(date +%s) - START))s] $*" | tee -a "$LOG"; }

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

log "kvtrie benchmark sweep: $(hostname) $(date -u +%Y-%m-%dT%H:%M:%SZ) BIN=$BIN OUT=$OUT READ_BW=$READ_BW"
{
  uname -a
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv 2>&1 || true
  command -v vulkaninfo >/dev/null && vulkaninfo --summary 2>&1 | head -60
  df -h /tmp 2>&1 | tail -1
  nproc
  for b in kvtrie-bench kvtrie-synth kernels_test_matmul kernels_test_matvec kernels_test_attention runner_test_gpu_model \
           runner_test_gpu_engine; do
    [ -x "$BIN/$b" ] || { echo "missing binary: $b"; continue; }
    ldd "$BIN/$b" | grep 'not found' | sed "s/^/$b: /"
  done
} >>"$LOG" 2>&1

# 1. Kernel and engine tests on the real GPU (cooperative-matrix and other device paths vs CPU references).
for t in kernels_test_matmul kernels_test_matvec kernels_test_attention runner_test_gpu_engine runner_test_gpu_model; do
  if [ -x "$BIN/$t" ]; then
    step 120 "test $t" "$BIN/$t" --gtest_brief=1
  else
    log "!! missing $BIN/$t"
    FAILED+=("missing $t")
  fi
done

B=$BIN/kvtrie-bench
TOKENS=32
PREFILL_REPEATS=3
[ "$QUICK" = 1 ] && { TOKENS=16; PREFILL_REPEATS=2; }

# 2. Device limits first (no model needed): copy-engine and shader read bandwidth, page copies, and single
# matrix products of llama3-8b shapes (per-dispatch time, chained as in a forward pass and independent).
step 60 "bandwidth" "$B" bandwidth --mib "${BW_MIB:-2048}"
for spec in "auto 4096 4096 1" "auto 14336 4096 1" "auto 4096 14336 1" "auto 4096 4096 32" "auto 4096 4096 512" \
            "tiled 4096 4096 512"; do
  set -- $spec
  step 60 "kernel $spec" "$B" kernel --type Q4_0 --path "$1" --rows "$2" --cols "$3" --tokens "$4" --dispatches 32
done
step 90 "copy" "$B" copy --pages "${COPY_PAGES:-1024}" --batch 256

# 3. Per model: load, prefill 512 and 4096, decode 1 sequence. Each model is written right before use and
# deleted after (llama3-8b F16 is 16 GB).
for preset in $PRESETS; do
  for type in $TYPES; do
    [ "$QUICK" = 1 ] && [ "$type" = F16 ] && [ "$preset" = llama3-8b ] && continue
    m=$(synth "$preset" "$type") || { FAILED+=("synth $preset $type"); continue; }
    name="$preset $type"
    load_repeats=2
    step 120 "load $name" "$B" load --model "$m" --repeats "$load_repeats" --warmup 0
    step 90 "prefill512 $name" "$B" prefill --model "$m" --prompt 512 --repeats "$PREFILL_REPEATS"
    # 4096 is attention-bound and slow (H200 llama3-1b Q4_0: 2.2 s a run): one timed run after one warm-up.
    step 120 "prefill4096 $name" "$B" prefill --model "$m" --prompt 4096 --repeats 1 --warmup 1
    step 90 "decode1 $name" "$B" decode --model "$m" --context 512 --sequences 1 --tokens "$TOKENS" \
      --read-bandwidth "$READ_BW" --profile
    if [ "$preset $type" = "$MULTI_MODEL" ]; then
      step 90 "decode8 $name" "$B" decode --model "$m" --context 512 --sequences 8 --tokens "$TOKENS" \
        --read-bandwidth "$READ_BW"
      step 120 "decode32 $name" "$B" decode --model "$m" --context 512 --sequences 32 --tokens "$TOKENS" \
        --read-bandwidth "$READ_BW"
      # Multi-turn at the issue's size: 32 conversations x 5 turns on a 2048-token system prompt, 256-token
      # user turns, 128-token answers. For llama3-8b (2 MiB pages of 16 tokens) the 4 GiB device tier holds
      # 32k tokens, less than the working set (~64k), so the oldest conversations are demoted and the
      # host-hit probe finds its prefix in host memory. MULTITURN=0 skips it (it takes several minutes).
      if [ "${MULTITURN:-1}" = 1 ]; then
        step 590 "multiturn $name" "$B" multiturn --model "$m" --conversations 32 --turns 5 --system 2048 \
          --user 256 --answer 128 --parallel 16 --kv-device-mib 4096 --kv-host-mib 16384
      fi
    fi
    rm -f "$m"
  done
done

# 4. Summary.
python3 - "$RESULTS" >"$OUT/summary.md" 2>>"$LOG" <<'PY' || log "!! summary failed"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def f(v, d=1):
    return "" if v is None else (f"{v:.{d}f}" if isinstance(v, float) else str(v))
dev = next((r.get("device") for r in rows if r.get("device")), "?")
print(f"Device: {dev}\n")
print("| model | load s | prefill 512 tok/s | prefill 4096 tok/s | decode tok/s (1 seq) | bound tok/s | ratio |")
print("|---|---|---|---|---|---|---|")
models = []
for r in rows:
    if "model" in r and r["model"] not in models and r["bench"] != "multiturn": models.append(r["model"])
for m in models:
    get = lambda b, **kw: next((r for r in rows if r["bench"] == b and r.get("model") == m and all(r.get(k) == v for k, v in kw.items())), {})
    ld, p5, p4, d1 = get("load"), get("prefill", prompt=512), get("prefill", prompt=4096), get("decode", sequences=1)
    print(f"| {m} | {f(ld.get('load_s'), 2)} | {f(p5.get('tok_s'), 0)} | {f(p4.get('tok_s'), 0)} | {f(d1.get('tok_s'), 1)} | {f(d1.get('bound_tok_s'), 0)} | {f(d1.get('bound_ratio'), 2)} |")
print()
for r in rows:
    if r["bench"] == "decode" and r["sequences"] > 1:
        print(f"- decode {r['model']} {r['sequences']} sequences: {r['tok_s']:.1f} tok/s in all (step {r['step_ms']:.2f} ms)")
for r in rows:
    if r["bench"] == "multiturn":
        keys = ["ttft_cold_ms", "ttft_device_hit_ms", "ttft_host_hit_ms", "host_probe_cached_host", "hit_rate",
                "total_tok_s", "completion_tok_s", "seconds", "demotions", "promotions"]
        print(f"- multiturn {r['model']} cache {r['cache']}: " + ", ".join(f"{k}={f(r.get(k), 2)}" for k in keys if k in r))
for r in rows:
    if r["bench"] == "copy":
        print(f"- copy {r['direction']}: pages {r['pages_gbs']:.1f} GB/s, plain vkCmdCopyBuffer {r['plain_gbs']:.1f} GB/s ({r['pages']} pages of {r['page_bytes']} B, batches of {r['batch']})")
    if r["bench"] == "bandwidth":
        print(f"- device copy bandwidth (copy engine, read+write): {r['copy_rw_bytes_per_s'] / 1e12:.2f} TB/s; shader read: {r.get('read_bytes_per_s', 0) / 1e12:.2f} TB/s")
for r in rows:
    if r["bench"] == "kernel":
        print(f"- kernel {r['type']} {r['path']} {r['rows']}x{r['cols']} tokens {r['tokens']}: chained {r['chained_us']:.1f} us ({r['weight_gbs_chained']:.0f} GB/s), independent {r['independent_us']:.1f} us ({r['weight_gbs_independent']:.0f} GB/s, {r['tflops_independent']:.1f} TFLOPS)")
for r in rows:
    if r["bench"] == "decode_profile" and r.get("op") == "total":
        print(f"- decode profile {r['model']} {r['sequences']} seq: GPU {r['gpu_ms']:.2f} ms over {r['dispatches']} dispatches, wall {r['wall_ms']:.2f} ms")
    elif r["bench"] == "decode_profile" and r.get("share", 0) > 0.02:
        print(f"  - {r['op']}: {r['dispatches']} dispatches, {r['ms']:.2f} ms ({100 * r['share']:.0f}%)")
PY
log "done in $(($(date +%s) - START)) s; failures: ${#FAILED[@]}"
for f in "${FAILED[@]}"; do log "   failed: $f"; done
cat "$OUT/summary.md" | tee -a "$LOG"

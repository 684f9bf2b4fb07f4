#!/usr/bin/env bash
# The daemon end to end on a GPU: starts `kvtrie serve` on a model, sends two greedy requests that share a
# ~3,000-token prefix, prints each one's prompt/cached tokens, TTFT and decode speed, the cache counters
# from /metrics, and stops the daemon with SIGTERM (its exit status should be 0).
#   bench/daemon_smoke.sh BIN_DIR MODEL.gguf [PORT]
set -u
BIN=${1:?usage: daemon_smoke.sh BIN_DIR MODEL.gguf [PORT]}
MODEL=${2:?usage: daemon_smoke.sh BIN_DIR MODEL.gguf [PORT]}
PORT=${3:-18080}
LOG=$(mktemp)
"$BIN/kvtrie" serve --model "$MODEL" --port "$PORT" --parallel 4 --ctx-size 4096 >"$LOG" 2>&1 &
pid=$!
for _ in $(seq 1 400); do curl -sf "localhost:$PORT/health" >/dev/null && break; sleep 0.05; done
prefix=$(python3 -c "print(' '.join(f'word{i}' for i in range(400)))")
for suffix in " first question" " second question"; do
  curl -s "localhost:$PORT/generate" \
    -d "{\"prompt\": \"$prefix$suffix\", \"max_tokens\": 32, \"temperature\": 0, \"stream\": false}" |
    python3 -c "import json,sys; r=json.loads(sys.stdin.read().strip().splitlines()[-1]); print({k: r.get(k) for k in ['prompt_tokens','cached_tokens','completion_tokens','ttft_ms','tokens_per_second','done_reason']})"
done
curl -s "localhost:$PORT/metrics" | grep -E "^kvtrie_(cache_hit|requests_total)"
kill -TERM "$pid"
wait "$pid"
echo "daemon exit $?"
grep -E "load:|listening" "$LOG"
rm -f "$LOG"

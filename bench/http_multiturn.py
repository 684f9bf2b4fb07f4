#!/usr/bin/env python3
"""Multi-turn chat benchmark over llama-server's `POST /completion` API with token-array prompts.

It drives any server that speaks that API, such as kvtrie started as `llama-server` or llama.cpp's own
llama-server, with the same workload:
  - C conversations of T turns share one S-token system prompt.
  - Every turn adds U user tokens, and the server answers with exactly A tokens (n_predict with ignore_eos).
  - A turn's prompt is the conversation's whole history as token ids: the system prompt, the earlier user
    turns, and the earlier answers exactly as the server returned them (`return_tokens`), then the new user
    turn.
  - K client threads take the next ready turn from a FIFO queue, so conversations interleave (turn 1 of
    every conversation, then turn 2, ...) and the working set can outgrow the server's slots.
Token ids are drawn from a seeded generator within --token-range, so every server sees identical prompts.
Caveat (llama.cpp's llama-server, seen with its release 0.5.0): when streaming, it leaves out of the stream
the id of a token whose text ended in an incomplete UTF-8 sequence (a byte token), so that answer comes back
short and the next turn's history departs from what the server cached from there on. `short_answers` and
`answer_tokens_missing` count this; it is rare with a large vocabulary, frequent with a tiny byte-level one.
--no-stream avoids it (complete ids), at the price of server-side TTFT.
One short request with unrelated tokens warms each server up first and is not counted.

Reported (one JSON object on stdout):
  - generated tokens/s over the run;
  - client-side TTFT per request: with streaming (the default), the time to the first streamed event;
    with --no-stream, the server's `timings.prompt_ms`;
  - p50/p90 of TTFT over the later turns (turn >= 2) and over the first turns;
  - cached prompt tokens as the server reports them (`timings.cache_n`).
A failed request (HTTP error, timeout, malformed answer) is counted and its conversation stops; the run
never hangs: a request gets --timeout seconds (each socket operation too), and no turn starts after
--deadline (the turns not sent are counted as skipped).
Exit status 0 when every request succeeded, 1 otherwise, 2 on bad arguments.

  python3 bench/http_multiturn.py --url http://127.0.0.1:8080 [--conversations 32 --turns 5 --system 2048
      --user 256 --answer 128 --clients 8] [--label kvtrie --model llama3-8b-Q4_0] [--requests-out FILE]

Python 3.11+ standard library only.
"""
import argparse
import collections
import http.client
import json
import os
import random
import sys
import threading
import time
import urllib.parse


def percentile(values, q):
    """Linear interpolation between closest ranks; None for no values."""
    if not values:
        return None
    v = sorted(values)
    pos = (len(v) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def process_alive(pid):
    """False once `pid` has exited (a zombie not yet reaped by its parent counts as exited)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, owned by someone else
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class Server:
    """One llama-server-compatible endpoint. Each call opens its own connection (thread-safe)."""

    def __init__(self, url, timeout):
        u = urllib.parse.urlsplit(url)
        if u.scheme != "http" or not u.hostname:
            raise ValueError(f"--url must be http://HOST:PORT, not {url!r}")
        self.host, self.port, self.timeout = u.hostname, u.port or 80, timeout

    def _connect(self):
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def get_json(self, path):
        conn = self._connect()
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read() or b"null")
        finally:
            conn.close()

    def post_json(self, path, body):
        conn = self._connect()
        try:
            conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 200:
                raise RuntimeError(f"HTTP {resp.status} from {path}: {data[:200]!r}")
            return json.loads(data)
        finally:
            conn.close()

    def wait_ready(self, seconds, pid=None):
        """Polls GET /health until {"status": "ok"}; False when `seconds` pass first or process `pid` exits."""
        end = time.monotonic() + seconds
        while True:
            if pid and not process_alive(pid):
                return False
            try:
                status, body = self.get_json("/health")
                if status == 200 and isinstance(body, dict) and body.get("status") == "ok":
                    return True
            except (OSError, ValueError, http.client.HTTPException):
                pass  # not listening yet, or loading
            if time.monotonic() >= end:
                return False
            time.sleep(0.5)

    def complete(self, prompt, n_predict, stream, deadline):
        """One /completion request. Returns (ttft_s or None, answer token ids or None, content, final event)."""
        body = {"prompt": prompt, "n_predict": n_predict, "cache_prompt": True, "stream": stream,
                "temperature": 0, "ignore_eos": True, "return_tokens": True, "seed": 1}
        conn = self._connect()
        try:
            start = time.monotonic()
            conn.request("POST", "/completion", json.dumps(body), {"Content-Type": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:200]!r}")
            if not stream:
                final = json.loads(resp.read())
                return None, final.get("tokens") or None, final.get("content", ""), final
            ttft, tokens, content, final = None, [], [], None
            while final is None:
                if time.monotonic() > deadline:
                    raise TimeoutError("request deadline passed while streaming")
                line = resp.readline()
                if not line:
                    raise RuntimeError("stream ended before the final event")
                line = line.strip()
                if line.startswith(b"error:"):
                    raise RuntimeError(line[:200].decode("utf-8", "replace"))
                if not line.startswith(b"data:"):
                    continue  # blank separators, comments
                event = json.loads(line[5:])
                if "error" in event:
                    raise RuntimeError(f"error event: {str(event['error'])[:200]}")
                if ttft is None:
                    ttft = time.monotonic() - start
                tokens += event.get("tokens") or []
                content.append(event.get("content") or "")
                if event.get("stop"):
                    final = event
            return ttft, tokens or None, "".join(content), final
        finally:
            conn.close()

    def tokenize(self, text):
        return self.post_json("/tokenize", {"content": text, "add_special": False})["tokens"]


class Workload:
    """Deterministic token ids for the system prompt and every (conversation, turn) user message."""

    def __init__(self, args):
        self.args = args
        lo, hi = args.token_range
        rng = random.Random(args.seed)
        self.system = [rng.randrange(lo, hi) for _ in range(args.system)]
        warm = random.Random(args.seed + 7777)
        self.warmup = [warm.randrange(lo, hi) for _ in range(16)]

    def user(self, conv, turn):
        lo, hi = self.args.token_range
        rng = random.Random((self.args.seed * 1_000_003 + conv) * 1009 + turn)
        return [rng.randrange(lo, hi) for _ in range(self.args.user)]


class Scheduler:
    """A FIFO of conversations ready for their next turn. A conversation is out of the queue while its turn
    runs, so its turns stay in order; take() returns None when every conversation has finished."""

    def __init__(self, n):
        self.ready = collections.deque(range(n))
        self.active = n
        self.cond = threading.Condition()

    def take(self):
        with self.cond:
            while not self.ready and self.active > 0:
                self.cond.wait()
            return self.ready.popleft() if self.ready else None

    def put_back(self, conv, finished):
        with self.cond:
            if finished:
                self.active -= 1
            else:
                self.ready.append(conv)
            self.cond.notify_all()


def run(args):
    """Runs the workload; returns (summary, per-request records)."""
    server = Server(args.url, args.timeout)
    if args.wait_ready and not server.wait_ready(args.wait_ready, args.wait_pid):
        return {"bench": "multiturn_http", "server": args.label, "model": args.model, "ok": 0, "failed": 0,
                "skipped": args.conversations * args.turns,
                "error": f"{args.url}/health not ok after {args.wait_ready} s (or the server exited)"}, []
    work = Workload(args)
    stream = not args.no_stream

    warmup_error = None
    try:
        server.complete(work.warmup, 4, stream, time.monotonic() + args.timeout)
    except Exception as e:  # noqa: BLE001 -- reported; the run goes on and its requests will tell
        warmup_error = f"{type(e).__name__}: {e}"

    histories = [list(work.system) for _ in range(args.conversations)]
    next_turn = [1] * args.conversations
    records, lock = [], threading.Lock()
    sched = Scheduler(args.conversations)
    run_start = time.monotonic()
    run_deadline = run_start + args.deadline if args.deadline > 0 else float("inf")

    def one_turn(conv, turn):
        prompt = histories[conv] + work.user(conv, turn)
        rec = {"conversation": conv, "turn": turn, "prompt_tokens": len(prompt), "ok": False}
        t0 = time.monotonic()
        try:
            ttft, tokens, content, final = server.complete(prompt, args.answer, stream, t0 + args.timeout)
            timings = final.get("timings") or {}
            source = "returned"
            if not tokens:  # the server gave no token ids: fall back to tokenizing the text
                tokens, source = server.tokenize(content), "tokenized"
            rec.update(ok=True, answer_tokens=len(tokens), answer_source=source,
                       cache_n=timings.get("cache_n"), prompt_n=timings.get("prompt_n"),
                       prompt_ms=timings.get("prompt_ms"), predicted_n=timings.get("predicted_n"),
                       predicted_ms=timings.get("predicted_ms"))
            rec["ttft_ms"] = ttft * 1e3 if ttft is not None else timings.get("prompt_ms")
            histories[conv] = prompt + tokens
        except Exception as e:  # noqa: BLE001 -- every failure is counted, never fatal
            rec["error"] = f"{type(e).__name__}: {e}"[:300]
        rec["start_s"], rec["end_s"] = t0 - run_start, time.monotonic() - run_start
        rec["latency_ms"] = (rec["end_s"] - rec["start_s"]) * 1e3
        with lock:
            records.append(rec)
        return rec["ok"]

    def client():
        while (conv := sched.take()) is not None:
            turn = next_turn[conv]
            ok = time.monotonic() < run_deadline and one_turn(conv, turn)
            next_turn[conv] = turn + 1
            sched.put_back(conv, finished=not ok or turn >= args.turns)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return summarize(args, records, stream, warmup_error, time.monotonic() > run_deadline)


def summarize(args, records, stream, warmup_error, deadline_hit):
    ok = [r for r in records if r["ok"]]
    failed = [r for r in records if not r["ok"]]
    later = [r for r in ok if r["turn"] >= 2]
    first = [r for r in ok if r["turn"] == 1]
    seconds = (max(r["end_s"] for r in records) - min(r["start_s"] for r in records)) if records else 0.0
    completion = sum(r["predicted_n"] if r.get("predicted_n") is not None else r["answer_tokens"] for r in ok)
    prompt = sum(r["prompt_tokens"] for r in ok)
    cached = sum(r.get("cache_n") or 0 for r in ok)
    later_cached = [r.get("cache_n") or 0 for r in later]

    def p(rs, q, key="ttft_ms"):
        v = percentile([r[key] for r in rs if r.get(key) is not None], q)
        return round(v, 2) if v is not None else None

    return {
        "bench": "multiturn_http", "server": args.label, "model": args.model, "url": args.url,
        "conversations": args.conversations, "turns": args.turns, "system": args.system, "user": args.user,
        "answer": args.answer, "clients": args.clients, "stream": stream,
        "ttft_source": "client, first streamed event" if stream else "server timings.prompt_ms",
        "requests": args.conversations * args.turns, "ok": len(ok), "failed": len(failed),
        "skipped": args.conversations * args.turns - len(records), "deadline_hit": deadline_hit,
        "seconds": round(seconds, 3), "completion_tokens": completion,
        "completion_tok_s": round(completion / seconds, 2) if seconds > 0 else None,
        "prompt_tokens": prompt, "cached_tokens": cached, "hit_rate": round(cached / prompt, 4) if prompt else None,
        "ttft_p50_ms": p(ok, 0.5), "ttft_first_turn_p50_ms": p(first, 0.5),
        "ttft_later_p50_ms": p(later, 0.5), "ttft_later_p90_ms": p(later, 0.9),
        "prompt_ms_later_p50": p(later, 0.5, "prompt_ms"),
        "cached_later_min": min(later_cached) if later_cached else None,
        "answer_tokens_returned": sum(r["answer_source"] == "returned" for r in ok),
        "answer_tokens_tokenized": sum(r["answer_source"] == "tokenized" for r in ok),
        "short_answers": sum(r["answer_tokens"] != args.answer for r in ok),
        "answer_tokens_missing": sum(max(0, (r.get("predicted_n") or 0) - r["answer_tokens"]) for r in ok),
        "warmup_error": warmup_error,
        "errors": sorted({r["error"] for r in failed})[:5],
    }, records


def token_range(text):
    lo, _, hi = text.partition(":")
    lo, hi = int(lo), int(hi)
    if not 0 <= lo < hi:
        raise argparse.ArgumentTypeError("expected LO:HI with 0 <= LO < HI")
    return lo, hi


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True, help="http://HOST:PORT of the server")
    ap.add_argument("--label", default="server", help="the server's name in the output (kvtrie, llama.cpp)")
    ap.add_argument("--model", default="", help="the model's name in the output")
    ap.add_argument("--conversations", type=int, default=32)
    ap.add_argument("--turns", type=int, default=5)
    ap.add_argument("--system", type=int, default=2048, help="shared system prompt tokens")
    ap.add_argument("--user", type=int, default=256, help="user tokens per turn")
    ap.add_argument("--answer", type=int, default=128, help="answer tokens per turn (forced)")
    ap.add_argument("--clients", type=int, default=8, help="concurrent requests")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--token-range", type=token_range, default=(3, 259), metavar="LO:HI",
                    help="prompt token ids are drawn from [LO, HI) (default 3:259, the byte tokens of a llama vocab)")
    ap.add_argument("--no-stream", action="store_true", help="non-streaming requests; TTFT from server timings")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per request (and per socket operation)")
    ap.add_argument("--deadline", type=float, default=0,
                    help="seconds for the whole run: no turn starts after it (those in flight finish)")
    ap.add_argument("--wait-ready", type=float, default=0, help="first wait this long for GET /health to be ok")
    ap.add_argument("--wait-pid", type=int, help="while waiting, give up as soon as this process (the server) exits")
    ap.add_argument("--requests-out", help="also write one JSON line per request to this file")
    args = ap.parse_args()
    if min(args.conversations, args.turns, args.system, args.user, args.answer, args.clients) < 1:
        ap.error("sizes and counts must be >= 1")

    summary, records = run(args)
    if args.requests_out:
        with open(args.requests_out, "w") as f:
            for r in sorted(records, key=lambda r: r["start_s"]):
                f.write(json.dumps(r) + "\n")
    print(json.dumps(summary), flush=True)
    return 0 if summary.get("failed") == 0 and summary.get("skipped") == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

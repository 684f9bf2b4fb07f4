#!/usr/bin/env python3
"""A fresh daemon's first requests: TTFT of a few prompts of distinct random tokens sent one after another
right after `kvtrie serve` reports healthy, twice over (the second round is the warm process's figure).
What a restart's first users pay beyond a warm step (session 25: 37-144 ms on the first one or two).
One JSON line per request on stdout.

    bench/first_requests.py BIN_DIR MODEL.gguf [--sizes 64,64,128,512,16,2048] [--daemon-args=--flag] > first.jsonl

(--daemon-args takes its value after "=" when that starts with "--".)
"""
import argparse
import json
import pathlib
import random
import shlex
import signal
import subprocess
import sys
import time
import urllib.request


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bin_dir")
    p.add_argument("model")
    p.add_argument("--sizes", default="64,64,128,512,16,2048", help="prompt tokens of each request, in order")
    p.add_argument("--port", type=int, default=18091)
    p.add_argument("--log", default="/tmp/first_requests.log", help="the daemon's log")
    p.add_argument("--daemon-args", default="", help="more arguments of `kvtrie serve`")
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    cmd = [str(pathlib.Path(args.bin_dir) / "kvtrie"), "serve", "--model", args.model, "--port", str(args.port),
           "-c", "4096", "--parallel", "1"] + shlex.split(args.daemon_args)
    rng = random.Random(7)
    with open(args.log, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        started = time.perf_counter()
        for _ in range(1200):
            try:
                with urllib.request.urlopen(f"http://localhost:{args.port}/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None:
                sys.exit(f"first_requests: the daemon exited ({proc.returncode}); see {args.log}")
            time.sleep(0.05)
        else:
            sys.exit("first_requests: the daemon did not become healthy")
        ready_ms = round((time.perf_counter() - started) * 1e3)
        for round_ in (1, 2):
            for n in sizes:
                tokens = [rng.randrange(1000, 32000) for _ in range(n)]
                body = json.dumps({"tokens": tokens, "max_tokens": 1, "temperature": 0, "stream": False}).encode()
                request = urllib.request.Request(f"http://localhost:{args.port}/generate", data=body,
                                                 headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=600) as r:
                    answer = json.loads(r.read().decode().strip().splitlines()[-1])
                print(json.dumps({"round": round_, "tokens": n, "ttft_ms": answer.get("ttft_ms"),
                                  "ready_ms": ready_ms}), flush=True)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=300)


if __name__ == "__main__":
    main()

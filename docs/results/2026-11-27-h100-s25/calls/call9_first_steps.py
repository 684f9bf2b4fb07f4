#!/usr/bin/env python3
"""A fresh daemon's first prefill steps: TTFT of prompts of several lengths in order, each distinct, twice
over, to tell a first-use cost (the first request of a process) from a per-shape one."""
import json, random, subprocess, sys, time, urllib.request
bin_dir, model, port = sys.argv[1], sys.argv[2], 18191
proc = subprocess.Popen([f"{bin_dir}/kvtrie", "serve", "--model", model, "--port", str(port), "-c", "4096",
                         "--parallel", "1"], stdout=open("/tmp/first_steps.log", "w"), stderr=subprocess.STDOUT)
for _ in range(600):
    try:
        with urllib.request.urlopen(f"http://localhost:{port}/health", timeout=1) as r:
            if r.status == 200: break
    except OSError: pass
    time.sleep(0.1)
rng = random.Random(5)
for rnd in (1, 2):
    for n in (64, 64, 128, 512, 16, 2048):
        tokens = [rng.randrange(1000, 32000) for _ in range(n)]
        body = json.dumps({"tokens": tokens, "max_tokens": 1, "temperature": 0, "stream": False}).encode()
        req = urllib.request.Request(f"http://localhost:{port}/generate", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r: a = json.loads(r.read())
        print(json.dumps({"round": rnd, "tokens": n, "ttft_ms": round(a["ttft_ms"], 1), "prompt_ms": round(a["prompt_ms"], 1)}), flush=True)
proc.terminate(); proc.wait()

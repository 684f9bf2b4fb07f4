#!/usr/bin/env python3
"""Issue 11's TTFT table: one long prompt recomputed, from the device tier, from the host tier and from the
disk tier after a restart (its files read from the disk, then again after a second restart with all of them
in the page cache, as a service restart finds those just written; by default, where the hit computes its
first pages while the last ones are read, and with --no-kv-disk-overlap, where it reads them all), through
the daemon (`kvtrie serve`), and a plain sequential read of the disk tier's files as the disk's own speed.
One JSON line per step on stdout (docs/BENCHMARKS.md, "The disk tier").

    bench/disk_tier_ttft.py BIN_DIR MODEL.gguf DISK_DIR [--tokens 8176] [--port 18090] > disk_tier_ttft.jsonl

DISK_DIR is a scratch directory on the disk to measure (emptied first). The daemon runs with the tiers of the
measurement in BENCHMARKS.md (--kv-device-mb 1300 --kv-host-mb 3000 --kv-disk-mb 8192): the device tier holds
one prompt and a quarter, so a second prompt pushes most of the first to the host tier. Before the first
restart's request the page cache of DISK_DIR is dropped (posix_fadvise, no root needed), as it is before the
plain read.
"""
import argparse
import json
import os
import pathlib
import random
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request


def drop_page_cache(directory):
    for path in pathlib.Path(directory).iterdir():
        if not path.is_file():
            continue
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def warm_page_cache(directory):
    # Every file read once: all of the tier's pages in the page cache, as just after the daemon wrote them.
    for path in pathlib.Path(directory).iterdir():
        if path.is_file():
            with open(path, "rb", buffering=0) as fh:
                while fh.read(8 << 20):
                    pass


def start(args, log, whole_read=False):
    # One sequence with room for the prompt (the default context is shorter than the measured prompt).
    cmd = [str(pathlib.Path(args.bin_dir) / "kvtrie"), "serve", "--model", args.model, "--port", str(args.port),
           "-c", str(args.tokens + 1040), "--parallel", "1",
           "--kv-device-mb", str(args.kv_device_mb), "--kv-host-mb", str(args.kv_host_mb),
           "--kv-disk-dir", args.disk_dir, "--kv-disk-mb", str(args.kv_disk_mb)]
    if whole_read:
        cmd.append("--no-kv-disk-overlap")
    cmd += shlex.split(args.daemon_args)
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(1200):
        try:
            with urllib.request.urlopen(f"http://localhost:{args.port}/health", timeout=1) as r:
                if r.status == 200:
                    return proc
        except OSError:
            pass
        if proc.poll() is not None:
            sys.exit(f"disk_tier_ttft: the daemon exited ({proc.returncode}); see {log.name}")
        time.sleep(0.1)
    sys.exit("disk_tier_ttft: the daemon did not become healthy")


def generate(args, step, tokens):
    body = json.dumps({"tokens": tokens, "max_tokens": 1, "temperature": 0, "stream": False}).encode()
    request = urllib.request.Request(f"http://localhost:{args.port}/generate", data=body,
                                     headers={"Content-Type": "application/json"})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=600) as r:
        answer = json.loads(r.read().decode().strip().splitlines()[-1])
    row = {"step": step, "wall_ms": round((time.perf_counter() - started) * 1e3, 1)}
    for key in ("prompt_tokens", "cached_tokens", "cached_tokens_device", "cached_tokens_host",
                "cached_tokens_disk", "ttft_ms", "prompt_ms"):
        row[key] = answer.get(key)
    print(json.dumps(row), flush=True)


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    if proc.wait(timeout=300) != 0:
        sys.exit(f"disk_tier_ttft: the daemon exited {proc.returncode} at SIGTERM")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bin_dir")
    p.add_argument("model")
    p.add_argument("disk_dir")
    p.add_argument("--tokens", type=int, default=8176)
    p.add_argument("--port", type=int, default=18090)
    p.add_argument("--kv-device-mb", type=int, default=1300)
    p.add_argument("--kv-host-mb", type=int, default=3000)
    p.add_argument("--kv-disk-mb", type=int, default=8192)
    p.add_argument("--daemon-args", default="", help="more arguments of every `kvtrie serve` (e.g. --log-level debug)")
    p.add_argument("--vocab", type=int, default=32000, help="token ids are drawn from [1000, vocab) or [3, vocab)")
    args = p.parse_args()
    shutil.rmtree(args.disk_dir, ignore_errors=True)
    rng = random.Random(11)
    low = 1000 if args.vocab > 2000 else 3  # past the special and byte tokens of a real vocabulary
    first = [rng.randrange(low, args.vocab) for _ in range(args.tokens)]
    other = [rng.randrange(low, args.vocab) for _ in range(args.tokens)]
    log_path = pathlib.Path(args.disk_dir).with_suffix(".log")
    with open(log_path, "w") as log:
        proc = start(args, log)
        generate(args, "cold", first)
        generate(args, "device_hit", first)
        generate(args, "other_prompt", other)
        generate(args, "host_hit", first)
        stop(proc)  # persists every cached page
        # The default (the hit computes its first pages while the last ones are read), then the whole run read
        # (--no-kv-disk-overlap); each after a restart with the page cache dropped, then after a second one
        # with every file of the tier in the page cache, as a service restart (an upgrade, `systemctl
        # restart`) finds the pages its predecessor just wrote.
        for whole_read, suffix in ((False, ""), (True, "_whole_read")):
            drop_page_cache(args.disk_dir)
            proc = start(args, log, whole_read)
            generate(args, "disk_hit_after_restart" + suffix, first)
            stop(proc)
            warm_page_cache(args.disk_dir)
            proc = start(args, log, whole_read)
            generate(args, "disk_hit_after_restart" + suffix + "_page_cache_warm", first)
            stop(proc)
    drop_page_cache(args.disk_dir)
    files = [f for f in pathlib.Path(args.disk_dir).iterdir() if f.suffix == ".kvpage"]
    started = time.perf_counter()
    total = 0
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while chunk := fh.read(8 << 20):
                total += len(chunk)
    seconds = time.perf_counter() - started
    print(json.dumps({"step": "plain_sequential_read", "files": len(files), "bytes": total,
                      "ms": round(seconds * 1e3, 1), "gbs": round(total / seconds / 1e9, 3)}), flush=True)
    print(f"daemon log: {log_path}", file=sys.stderr)


if __name__ == "__main__":
    main()

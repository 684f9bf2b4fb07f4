#!/usr/bin/env python3
"""Joins a sweep's results.jsonl (bench/run_device.sh) into docs-ready output:
  - side_by_side.jsonl: one row per measure that kvtrie and llama.cpp both ran in the sweep, e.g.
      {"bench": "decode", "model": "llama3-8b-Q4_0", "context": 512, "sequences": 1, "kvtrie_tok_s": 210.0,
       "llamacpp_tok_s": 253.0, "ratio": 0.83, "device": "NVIDIA H200", "commit": "4e7c38a"}
    ("prompt" instead of "context" for prefill; for multiturn also the workload, both later-turn TTFT p50s and
    both hit rates). A side that did not run gives null and no ratio.
  - summary.md (stdout): the side-by-side tables, then kvtrie's own figures.

  python3 bench/sweep_report.py OUT/results.jsonl --side-by-side OUT/side_by_side.jsonl --commit C > OUT/summary.md

Rows without "engine" are kvtrie-bench's; peer rows (bench/peer_rows.py) carry "engine": "llama.cpp"; the HTTP
multi-turn rows (bench/http_multiturn.py) are "bench": "multiturn_http" with "server": "kvtrie"|"llama.cpp".
"""
import argparse
import json
import sys


def load(path):
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    row = json.loads(line)
                except ValueError:
                    print(f"sweep_report: {path}:{n}: not JSON, skipped", file=sys.stderr)
                    continue
                # Rates and times are floats even where the writer's 6 digits made them integral (3730).
                rows.append({k: float(v) if type(v) is int and k.endswith(("tok_s", "_ms", "_s")) else v
                             for k, v in row.items()})
    return rows


def fmt(v, digits=1):
    if v is None:
        return ""
    return f"{v:,.{digits}f}" if isinstance(v, float) else str(v)


def percent(share):
    return "" if share is None else f"{100 * share:.1f}%"


def ratio(a, b):
    return round(a / b, 4) if a is not None and b else None


def find(rows, **match):
    """The first row whose keys equal `match`; engine None matches kvtrie's rows (no "engine" key)."""
    return next((r for r in rows if all(r.get(k) == v for k, v in match.items())), None)


def side_by_side(rows, commit):
    device = next((r["device"] for r in rows if r.get("device") and not r.get("engine")), None)
    models = list(dict.fromkeys(r["model"] for r in rows if r.get("model") and r.get("bench") in ("prefill", "decode")))
    out = []

    def pair(bench, model, key, size, sequences):
        match = {"bench": bench, "model": model, key: size, "sequences": sequences}
        if bench == "prefill":
            match.pop("sequences")
        k, p = find(rows, engine=None, **match), find(rows, engine="llama.cpp", **match)
        if k or p:
            kt, pt = k and k["tok_s"], p and p["tok_s"]
            out.append({"bench": bench, "model": model, key: size, "sequences": sequences, "kvtrie_tok_s": kt,
                        "llamacpp_tok_s": pt, "ratio": ratio(kt, pt), "device": device, "commit": commit})

    for m in models:
        for prompt in sorted({r["prompt"] for r in rows if r.get("bench") == "prefill" and r.get("model") == m}):
            pair("prefill", m, "prompt", prompt, 1)
        keys = {(r["sequences"], r["context"]) for r in rows if r.get("bench") == "decode" and r.get("model") == m}
        for sequences, context in sorted(keys):
            pair("decode", m, "context", context, sequences)

    http = [r for r in rows if r.get("bench") == "multiturn_http"]
    workload = ("model", "conversations", "turns", "system", "user", "answer", "clients")
    for shape in dict.fromkeys(tuple(r.get(k) for k in workload) for r in http):
        same = [r for r in http if tuple(r.get(k) for k in workload) == shape]
        k = next((r for r in same if r.get("server") == "kvtrie"), {})
        p = next((r for r in same if r.get("server") == "llama.cpp"), {})
        kt, pt = k.get("completion_tok_s"), p.get("completion_tok_s")
        row = {"bench": "multiturn", **dict(zip(workload, shape)), "sequences": shape[-1],
               "kvtrie_tok_s": kt, "llamacpp_tok_s": pt, "ratio": ratio(kt, pt),
               "kvtrie_ttft_p50_ms": k.get("ttft_later_p50_ms"), "llamacpp_ttft_p50_ms": p.get("ttft_later_p50_ms"),
               "kvtrie_hit_rate": k.get("hit_rate"), "llamacpp_hit_rate": p.get("hit_rate"),
               "kvtrie_failed": k.get("failed"), "llamacpp_failed": p.get("failed"),
               "kvtrie_skipped": k.get("skipped"), "llamacpp_skipped": p.get("skipped"),
               "kvtrie_answer_tokens_missing": k.get("answer_tokens_missing"),
               "llamacpp_answer_tokens_missing": p.get("answer_tokens_missing"),
               "device": device, "commit": commit}
        out.append(row)
    return out


def print_side_by_side(sbs):
    measured = [r for r in sbs if r["bench"] != "multiturn"]
    if measured:
        print("kvtrie beside llama.cpp (same files, same run; tok/s; ratio = kvtrie / llama.cpp):\n")
        print("| model | measure | kvtrie | llama.cpp | ratio |")
        print("|---|---|---|---|---|")
        for r in measured:
            if r["bench"] == "prefill":
                what = f"prefill {r['prompt']}"
            else:
                what = f"decode, {r['sequences']} seq, context {r['context']}"
            print(f"| {r['model']} | {what} | {fmt(r['kvtrie_tok_s'])} | {fmt(r['llamacpp_tok_s'])} | {fmt(r['ratio'], 2)} |")
        print()
    for r in (r for r in sbs if r["bench"] == "multiturn"):
        print(f"Multi-turn over HTTP, {r['model']}: {r['conversations']} conversations x {r['turns']} turns, system "
              f"{r['system']}, user {r['user']}, answer {r['answer']}, {r['clients']} clients:\n")
        print("| server | generated tok/s | later-turn TTFT p50 ms | hit rate | failed / skipped | answer ids missing |")
        print("|---|---|---|---|---|---|")
        for server, key in (("kvtrie", "kvtrie"), ("llama.cpp", "llamacpp")):
            print(f"| {server} | {fmt(r[key + '_tok_s'])} | {fmt(r[key + '_ttft_p50_ms'], 0)} | "
                  f"{fmt(r[key + '_hit_rate'], 2)} | {fmt(r[key + '_failed'])} / {fmt(r[key + '_skipped'])} | "
                  f"{fmt(r[key + '_answer_tokens_missing'])} |")
        print(f"\nratio (generated tok/s): {fmt(r['ratio'], 2)}\n")


def print_kvtrie(rows):
    kv = [r for r in rows if not r.get("engine")]
    models = list(dict.fromkeys(r["model"] for r in kv if "model" in r and r["bench"] in ("load", "prefill", "decode")))
    # The long prompt and context: LONG in run_device.sh (4096 unless set).
    long = max((r["prompt"] for r in kv if r["bench"] == "prefill" and r["prompt"] != 512), default=4096)
    # The share of the read bound to one decimal place of a percent: issue 16's 55% is a threshold, and two
    # decimals of the ratio printed 0.547 as 0.55.
    print(f"| model | load s | prefill 512 tok/s | prefill {long} tok/s | decode tok/s (1 seq) | bound tok/s | of bound "
          f"| decode tok/s (1 seq, context {long}) |")
    print("|---|---|---|---|---|---|---|---|")
    for m in models:
        ld = find(kv, bench="load", model=m) or {}
        p5 = find(kv, bench="prefill", model=m, prompt=512) or {}
        pl = find(kv, bench="prefill", model=m, prompt=long) or {}
        d1 = find(kv, bench="decode", model=m, sequences=1, context=512) or {}
        dl = find(kv, bench="decode", model=m, sequences=1, context=long) or {}
        print(f"| {m} | {fmt(ld.get('load_s'), 2)} | {fmt(p5.get('tok_s'), 0)} | {fmt(pl.get('tok_s'), 0)} | "
              f"{fmt(d1.get('tok_s'), 1)} | {fmt(d1.get('bound_tok_s'), 0)} | {percent(d1.get('bound_ratio'))} | "
              f"{fmt(dl.get('tok_s'), 1)} |")
    print()
    for r in kv:
        b = r["bench"]
        if b == "decode" and r["sequences"] > 1:
            print(f"- decode {r['model']} {r['sequences']} sequences, context {r['context']}: {r['tok_s']:.1f} tok/s "
                  f"in all (step {r['step_ms']:.2f} ms)")
        elif b == "multiturn":
            keys = ["ttft_cold_ms", "ttft_device_hit_ms", "ttft_host_hit_ms", "host_probe_cached_host", "hit_rate",
                    "total_tok_s", "completion_tok_s", "seconds", "demotions", "promotions"]
            print(f"- multiturn (engine) {r['model']} cache {r['cache']}: "
                  + ", ".join(f"{k}={fmt(r.get(k), 2)}" for k in keys if k in r))
        elif b == "copy":
            print(f"- copy {r['direction']}: pages {r['pages_gbs']:.1f} GB/s, plain vkCmdCopyBuffer {r['plain_gbs']:.1f} "
                  f"GB/s ({r['pages']} pages of {r['page_bytes']} B, batches of {r['batch']})")
        elif b == "bandwidth":
            print(f"- device copy bandwidth (copy engine, read+write): {r['copy_rw_bytes_per_s'] / 1e12:.2f} TB/s; "
                  f"shader read: {r.get('read_bytes_per_s', 0) / 1e12:.2f} TB/s")
        elif b == "kernel":
            print(f"- kernel {r['type']} {r['path']} {r['rows']}x{r['cols']} tokens {r['tokens']}: chained "
                  f"{r['chained_us']:.1f} us ({r['weight_gbs_chained']:.0f} GB/s), independent {r['independent_us']:.1f} "
                  f"us ({r['weight_gbs_independent']:.0f} GB/s, {r['tflops_independent']:.1f} TFLOPS)")
        elif b == "decode_profile" and r.get("op") == "total":
            print(f"- decode profile {r['model']} {r['sequences']} seq: GPU {r['gpu_ms']:.2f} ms over "
                  f"{r['dispatches']} dispatches, wall {r['wall_ms']:.2f} ms")
            for op in kv:  # its ops (emitted before the total)
                if (op["bench"] == b and op.get("op") != "total" and op.get("share", 0) > 0.02
                        and op.get("model") == r["model"] and op.get("sequences") == r["sequences"]):
                    print(f"  - {op['op']}: {op['dispatches']} dispatches, {op['ms']:.2f} ms ({100 * op['share']:.0f}%)")
        elif b == "prefill_profile" and r.get("op") == "total":
            print(f"- prefill profile {r['model']} (last chunk of {r.get('prompt', '?')} tokens): GPU {r['gpu_ms']:.2f} ms "
                  f"over {r['dispatches']} dispatches, wall {r['wall_ms']:.2f} ms")
            for op in kv:
                if (op["bench"] == b and op.get("op") != "total" and op.get("share", 0) > 0.02
                        and op.get("model") == r["model"]):
                    print(f"  - {op['op']}: {op['dispatches']} dispatches, {op['ms']:.2f} ms ({100 * op['share']:.0f}%)")
    peer = [r for r in rows if r.get("engine") == "llama.cpp"]
    for dev, feat in dict.fromkeys((r.get("peer_device"), r.get("peer_features")) for r in peer):
        print(f"- llama.cpp device: {dev} ({feat})")
    for m in dict.fromkeys(r["model"] for r in peer if r["bench"] == "load"):
        first = find(peer, bench="load", model=m)
        print(f"- llama.cpp load+context {m} (its first run): {first['load_s']:.2f} s")


def main():
    ap = argparse.ArgumentParser(description="results.jsonl -> side_by_side.jsonl and summary.md")
    ap.add_argument("results")
    ap.add_argument("--side-by-side", required=True, help="where to write the side-by-side rows")
    ap.add_argument("--commit", default="unknown", help="the kvtrie commit the binaries were built from")
    args = ap.parse_args()
    rows = load(args.results)
    sbs = side_by_side(rows, args.commit)
    with open(args.side_by_side, "w") as f:
        for r in sbs:
            f.write(json.dumps(r) + "\n")
    device = next((r["device"] for r in rows if r.get("device")), "?")
    print(f"Device: {device}; kvtrie commit {args.commit}\n")
    print_side_by_side(sbs)
    print_kvtrie(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

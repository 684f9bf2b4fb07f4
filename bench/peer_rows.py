#!/usr/bin/env python3
"""Turns peerbench's output (llama.cpp, the speed reference: ../shared/peer/peerbench.cpp) into JSON rows
shaped like kvtrie-bench's, with "engine": "llama.cpp", one per line on stdout.

  peerbench MODEL LIBDIR NGL PP TG REPS [PAR] 2>&1 | python3 bench/peer_rows.py --model MODEL [--only-parallel]

The lines read (the rest is ignored):
  peer load+context 1.33 s                                              -> load row
  peer llama.cpp M ngl=99: pp512 9921.0 tok/s  tg128 253.1 tok/s (best of 3)
      -> prefill row (prompt 512) and decode row (1 sequence; context 512: peerbench decodes right after the
         prompt, so its tg runs at a context of PP tokens)
  peer llama.cpp par=32 ctx=512: decode 1592.0 tok/s aggregate           -> decode row (32 sequences)
  ggml_vulkan: 0 = NVIDIA H200 (NVIDIA) | ... | matrix cores: NV_coopmat2 (stderr) -> peer_device, peer_features
With --only-parallel the prefill and 1-sequence rows are dropped: in a parallel run they are its one-repeat
warm-up, not measurements. Exit status 1 when no measurement line was found.
"""
import argparse
import json
import pathlib
import re
import sys

SINGLE = re.compile(r"^peer llama\.cpp .* ngl=(\d+): pp(\d+) ([\d.]+) tok/s\s+tg(\d+) ([\d.]+) tok/s \(best of (\d+)\)")
PARALLEL = re.compile(r"^peer llama\.cpp par=(\d+) ctx=(\d+): decode ([\d.]+) tok/s aggregate")
LOAD = re.compile(r"^peer load\+context ([\d.]+) s")
DEVICE = re.compile(r"^ggml_vulkan: 0 = (.*) \(([^()]*)\) \| (.*)$")


def parse(lines, model, only_parallel):
    rows, device, features, ngl = [], None, None, None
    for line in lines:
        line = line.rstrip("\n")
        if m := DEVICE.match(line):
            device, features = m.group(1), m.group(3)
        elif m := LOAD.match(line):
            if not only_parallel:
                rows.append({"bench": "load", "load_s": float(m.group(1))})
        elif m := SINGLE.match(line):
            ngl = int(m.group(1))
            pp, tg, reps = int(m.group(2)), int(m.group(4)), int(m.group(6))
            if not only_parallel:
                rows.append({"bench": "prefill", "prompt": pp, "tok_s": float(m.group(3)), "repeats": reps})
                rows.append({"bench": "decode", "context": pp, "sequences": 1, "tokens": tg,
                             "tok_s": float(m.group(5)), "repeats": reps})
        elif m := PARALLEL.match(line):
            rows.append({"bench": "decode", "context": int(m.group(2)), "sequences": int(m.group(1)),
                         "tok_s": float(m.group(3))})
    common = {"engine": "llama.cpp", "model": model, "peer_device": device, "peer_features": features, "ngl": ngl}
    return [{**row, **common} for row in rows]


def main():
    ap = argparse.ArgumentParser(description="peerbench output -> JSON rows")
    ap.add_argument("--model", required=True, help="the GGUF path (its file stem names the model, as kvtrie-bench does)")
    ap.add_argument("--only-parallel", action="store_true", help="keep only the parallel decode row")
    args = ap.parse_args()
    rows = parse(sys.stdin, pathlib.Path(args.model).stem, args.only_parallel)
    for row in rows:
        print(json.dumps(row))
    return 0 if any(r["bench"] != "load" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

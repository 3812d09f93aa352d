#!/usr/bin/env python3
"""Replays every input that once crashed or hung attn-opt (regressions/*.mlir)
as text and as bytecode, through parse/verify and the CPU, NVVM and ROCDL
pipelines. Each file states what must happen:

  // EXPECT: <diagnostic>       every run fails with this diagnostic
  // EXPECT-GPU: <diagnostic>   the GPU pipelines fail with it; parse/verify
                                and the CPU pipeline succeed

A crash, a hang (--timeout), or any other outcome fails the replay.

usage: run_regressions.py ATTN_OPT DIR [--timeout SECONDS]
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

PIPELINES = {
    "verify": [],
    "cpu": ["--attn-lower-to-cpu-pipeline"],
    "nvvm": ["--attn-lower-to-nvvm-pipeline=chip=sm_90a"],
    "rocdl": ["--attn-lower-to-rocdl-pipeline=chip=gfx942 format=isa"],
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("attn_opt")
    ap.add_argument("dir")
    ap.add_argument("--timeout", type=float, default=30)
    args = ap.parse_args()
    files = sorted(glob.glob(os.path.join(args.dir, "*.mlir")))
    assert files, "no regression inputs"
    failures = runs = 0
    with tempfile.TemporaryDirectory(prefix="attn_regress_") as tmp:
        for path in files:
            text = open(path).read()
            every = re.search(r"^// EXPECT: (.*)$", text, re.M)
            gpu = re.search(r"^// EXPECT-GPU: (.*)$", text, re.M)
            assert every or gpu, f"{path}: no EXPECT line"
            bc = os.path.join(tmp, os.path.basename(path) + "bc")
            # Inputs the parser rejects (a bad attribute) have no bytecode.
            written = subprocess.run(
                [args.attn_opt, path,
                 "--mlir-very-unsafe-disable-verifier-on-parsing",
                 "--emit-bytecode", "-o", bc],
                capture_output=True, timeout=args.timeout).returncode == 0
            for source in (path, bc) if written else (path,):
                for name, flags in PIPELINES.items():
                    expect = (every.group(1) if every else
                              gpu.group(1) if name in ("nvvm", "rocdl") else None)
                    runs += 1
                    what = f"{os.path.basename(source)} {name}"
                    try:
                        proc = subprocess.run(
                            [args.attn_opt, source, *flags, "-o", os.devnull],
                            capture_output=True, text=True,
                            timeout=args.timeout)
                    except subprocess.TimeoutExpired:
                        print(f"HANG: {what}")
                        failures += 1
                        continue
                    ok = (proc.returncode == 0 if expect is None else
                          proc.returncode == 1 and expect in proc.stderr)
                    if not ok:
                        print(f"FAIL: {what}: rc={proc.returncode}, expected "
                              f"{'success' if expect is None else expect!r}\n"
                              f"{proc.stderr[-1500:]}")
                        failures += 1
    print(f"{len(files)} regression inputs, {runs} runs, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

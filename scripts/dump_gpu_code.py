#!/usr/bin/env python3
"""Writes the PTX (sm_80, sm_89, sm_90a) and AMDGPU ISA (gfx942, gfx90a,
gfx1100) of every resource-sweep case and every example to OUT_DIR, one
file per kernel and chip, so that two builds can be compared byte for byte
(refactorings that must not change the generated code):

    scripts/dump_gpu_code.py build-before/bin/attn-opt /tmp/before
    scripts/dump_gpu_code.py build/bin/attn-opt /tmp/after
    diff -r /tmp/before /tmp/after && echo identical

With --stage=gpu it writes the GPU dialect IR that attn-plan +
convert-attn-to-gpu produce instead (every line of attn-mlir's own code
generation; the rest of the pipelines is upstream code), which takes a
fraction of the time.
"""
import concurrent.futures
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test" / "Pipelines"))
from extract_gpu_binary import extract  # noqa: E402
from sweep_cases import cases  # noqa: E402

# --stage=gpu: only attn-plan + convert-attn-to-gpu (the attn-mlir code; the
# rest of the pipelines is upstream MLIR/LLVM fed the same input), which is
# far faster than the whole pipelines' PTX/ISA.
STAGES = {
    "sm_80": "--attn-plan=target=nvvm chip=sm_80",
    "sm_89": "--attn-plan=target=nvvm chip=sm_89",
    "sm_90a": "--attn-plan=target=nvvm chip=sm_90a",
    "gfx942": "--attn-plan=target=rocdl chip=gfx942",
    "gfx90a": "--attn-plan=target=rocdl chip=gfx90a",
    "gfx1100": "--attn-plan=target=rocdl chip=gfx1100",
}
CONVERT = {c: ("--convert-attn-to-gpu=target=" +
               ("nvvm" if c.startswith("sm") else "rocdl") + f" chip={c}")
           for c in STAGES}

PIPELINES = {
    "sm_80": "--attn-lower-to-nvvm-pipeline=chip=sm_80",
    "sm_89": "--attn-lower-to-nvvm-pipeline=chip=sm_89",
    "sm_90a": "--attn-lower-to-nvvm-pipeline=chip=sm_90a",
    "gfx942": "--attn-lower-to-rocdl-pipeline=chip=gfx942 format=isa",
    "gfx90a": "--attn-lower-to-rocdl-pipeline=chip=gfx90a format=isa",
    "gfx1100": "--attn-lower-to-rocdl-pipeline=chip=gfx1100 format=isa",
}


def work():
    for name, text in cases():
        yield name, text
    for path in sorted((ROOT / "examples").glob("*.mlir")):
        yield f"example {path.stem}", path.read_text()


def dump(attn_opt, out, name, text, chip, stage):
    if stage == "gpu":
        lowered = subprocess.run([attn_opt, "-", STAGES[chip], CONVERT[chip]],
                                 input=text, capture_output=True, text=True)
        body = lowered.stdout + lowered.stderr
        file = re.sub(r"[^A-Za-z0-9_.=-]+", "_", f"{name}.{chip}.mlir")
        (out / file).write_text(body)
        return
    lowered = subprocess.run([attn_opt, "-", PIPELINES[chip]], input=text,
                             capture_output=True, text=True)
    try:
        body = (extract(lowered.stdout) + "\n// manifest\n" +
                extract(lowered.stdout, manifest=True)
                if lowered.returncode == 0 else "error:\n" + lowered.stderr)
    except SystemExit as e:   # extract() found nothing embedded
        body = f"{e}\n{lowered.stderr}"
    file = re.sub(r"[^A-Za-z0-9_.=-]+", "_", f"{name}.{chip}.txt")
    (out / file).write_text(body)


def main():
    attn_opt, out = sys.argv[1], Path(sys.argv[2])
    stage = "gpu" if "--stage=gpu" in sys.argv else "binary"
    out.mkdir(parents=True, exist_ok=True)
    jobs = [(n, t, c) for n, t in work() for c in PIPELINES]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda j: dump(attn_opt, out, *j, stage), jobs))
    print(f"wrote {len(jobs)} files to {out}")


if __name__ == "__main__":
    main()

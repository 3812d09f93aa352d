"""SASS evidence for the kernels of a recorded run: for each specialization
of a record (ATTN_MLIR_RECORD file) that has a bundle for the chip, the
op, its pinned schedule ("plan" where attn-plan chose it), threads and
shared bytes per block, ptxas's registers and spills (from the manifest) and the
counts of the instructions that show which pipeline it runs (cuobjdump
-sass of the bundle's cubin):

    python3 bench/sass_report.py spec.jsonl [sm_90a] [--only tma]

HGMMA / QGMMA: 16-bit / fp8 warpgroup MMAs; HMMA: mma.sync; UTMALDG: TMA
tile loads; UBLKCP: bulk copies; LDGSTS: cp.async; SYNCS: mbarrier
operations; LDSM / STSM: ldmatrix / stmatrix; USETMAXREG: register
reallocation; LDL / STL: local memory (spills). Needs cuobjdump (the
device machine has it).
"""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from attn_mlir import _gpu  # noqa: E402

OPCODES = ["HGMMA", "QGMMA", "HMMA", "UTMALDG", "UBLKCP", "LDGSTS", "SYNCS",
           "LDSM", "STSM", "USETMAXREG", "LDL", "STL"]


def cuobjdump():
    return (shutil.which("cuobjdump") or
            "/usr/local/cuda/bin/cuobjdump")


def counts(cubin):
    sass = subprocess.run([cuobjdump(), "-sass", str(cubin)],
                          capture_output=True, text=True, check=True).stdout
    ops = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9]+)",
                     sass)
    return {op: sum(1 for o in ops if o == op) for op in OPCODES}


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    record, chip = args[0], (args[1] if len(args) > 1 else "sm_90a")
    only_tma = "--only" in sys.argv and "tma" in sys.argv
    roots = [Path(p) for p in os.environ.get("ATTN_MLIR_BUNDLES", "").split(
        os.pathsep) if p]
    seen = set()
    print("| op | schedule | threads | smem | regs | spill st/ld | " +
          " | ".join(OPCODES) + " |")
    print("| --- " * (6 + len(OPCODES)) + "|")
    for line in open(record):
        text = json.loads(line)["mlir"]
        key = _gpu.bundle_key(text, chip)
        if key in seen:
            continue
        seen.add(key)
        bundle = next((r / key for r in roots
                       if (r / key / "manifest.json").is_file()), None)
        if bundle is None:
            continue
        sched = re.search(r"#attn\.schedule<([^>]*)>", text)
        sched = sched.group(1) if sched else "plan"
        if only_tma and "tma = true" not in sched and sched != "plan":
            continue
        manifest = json.loads((bundle / "manifest.json").read_text())
        res = next(iter(manifest.get("resources", {}).values()), {})
        kernel = manifest["kernels"][0]
        op = re.search(r"attn\.(\w+)", text).group(1)
        sig = re.search(r"%q: (memref<[^>]*>)", text)
        c = counts(bundle / manifest["binary"])
        print(f"| {op} {sig.group(1) if sig else ''} | {sched} | "
              f"{kernel['threads']} | {kernel['shared_bytes']} | "
              f"{res.get('registers', '?')} | {res.get('spill_stores', '?')}/"
              f"{res.get('spill_loads', '?')} | " +
              " | ".join(str(c[o]) for o in OPCODES) + " |", flush=True)


if __name__ == "__main__":
    main()

"""Compiles each attn op of sweep_cases.py at its default schedule for
gfx942 and gfx90a (wave64 MFMA) and gfx1100 (wave32 WMMA) with
attn-lower-to-rocdl-pipeline (format=isa), and reports every kernel whose
AMDGPU resource metadata shows scratch (private segment, VGPR spills) or
whose ISA lacks the chip's matrix instruction (SGPR spills, which go to
VGPR lanes, are listed, not failed). Prints one line per
kernel (name, chip, matrix instructions, VGPRs), one line per failure,
then "checked N kernels, M failed"; exits 1 when any failed.

usage: rocdl_resource_sweep.py ATTN_OPT [-j JOBS] [--chips gfx942,...]
       rocdl_resource_sweep.py ATTN_OPT --file K.mlir --chips gfx942
"""
import concurrent.futures
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from extract_gpu_binary import extract  # noqa: E402
from sweep_cases import cases  # noqa: E402

CHIPS = ("gfx942", "gfx90a", "gfx1100")


def field(isa, name):
    return [int(x) for x in re.findall(rf"\.{name}:\s+(\d+)", isa)]


def check(attn_opt, name, text, chip):
    """(report line, failure or None) of one case on one chip."""
    lowered = subprocess.run(
        [attn_opt, "-", f"--attn-lower-to-rocdl-pipeline=chip={chip} format=isa"],
        input=text, capture_output=True, text=True)
    if " f32" in name and chip == "gfx1100":
        # RDNA3 has no f32 WMMA: the op must be rejected, saying so.
        ok = lowered.returncode and "no f32 WMMA" in lowered.stderr
        return (f"{name} {chip}: rejected (no f32 WMMA)",
                None if ok else f"{name} {chip}: f32 not rejected clearly: "
                f"{lowered.stderr[-400:]}")
    if lowered.returncode:
        return None, f"{name} {chip}: attn-opt failed: {lowered.stderr[-400:]}"
    isa = extract(lowered.stdout)
    want = ("v_wmma_" if chip == "gfx1100" else
            "v_mfma_f32_16x16x4" if " f32" in name else "v_mfma_")
    matrix = re.findall(r"\b(v_(?:mfma|wmma)_\w+)", isa)
    bad = []
    if not matrix:
        bad.append(f"no {want}* instruction")
    elif any(not m.startswith(want) for m in matrix):
        bad.append(f"matrix instructions other than {want}*")
    for key in ("private_segment_fixed_size", "vgpr_spill_count"):
        if any(field(isa, key)):
            bad.append(f"{key} {field(isa, key)}")
    if "__ocml" in isa or "__ockl" in isa:
        bad.append("device-library call")
    line = (f"{name} {chip}: {len(matrix)} x {sorted(set(matrix))}, "
            f"vgpr {field(isa, 'vgpr_count')}, "
            f"sgpr spills (to VGPR lanes) {field(isa, 'sgpr_spill_count')}")
    return line, (f"{name} {chip}: {'; '.join(bad)}" if bad else None)


def main():
    attn_opt = sys.argv[1]
    jobs = int(sys.argv[sys.argv.index("-j") + 1]) if "-j" in sys.argv else 2
    chips = (sys.argv[sys.argv.index("--chips") + 1].split(",")
             if "--chips" in sys.argv else CHIPS)
    if "--file" in sys.argv:
        path = sys.argv[sys.argv.index("--file") + 1]
        named = [(os.path.basename(path), open(path).read())]
    else:
        named = list(cases())
    work = [(n, t, c) for n, t in named for c in chips]
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        results = list(pool.map(lambda w: check(attn_opt, *w), work))
    for line, _ in results:
        if line:
            print(line)
    failures = [f for _, f in results if f]
    for f in failures:
        print("FAIL", f)
    print(f"checked {len(work)} kernels, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

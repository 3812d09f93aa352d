"""Compiles each attn op over a grid of head dims, element types and GPU
chips at the default schedules (attn-lower-to-nvvm-pipeline, then ptxas -v)
and reports every kernel whose resource report shows a stack frame, spills
or a performance loss ptxas reports (C75xx: serialized wgmma, ignored
setmaxnreg), and every kernel whose dynamic shared memory is not declared
`.extern` (a one-byte static variable that ptxas lays out among the
mbarriers, so that the tiles overlap them). Prints one line per failure,
then
"checked N kernels, M failed"; exits 1 when any failed.

usage: nvvm_resource_sweep.py ATTN_OPT PTXAS [-j JOBS]
       nvvm_resource_sweep.py --print CASE   (the MLIR of one case)
"""
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from extract_gpu_binary import extract  # noqa: E402
from sweep_cases import cases  # noqa: E402


def check(attn_opt, ptxas, name, text, chip):
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "k.mlir")
        with open(src, "w") as f:
            f.write(text)
        lowered = subprocess.run(
            [attn_opt, src, f"--attn-lower-to-nvvm-pipeline=chip={chip}"],
            capture_output=True, text=True)
        if lowered.returncode:
            return f"{name} {chip}: attn-opt failed: {lowered.stderr[-400:]}"
        ptx = os.path.join(tmp, "k.ptx")
        text = extract(lowered.stdout)
        with open(ptx, "w") as f:
            f.write(text)
        if re.search(r"^\s*\.shared\s.*__dynamic_shmem__\w*;", text, re.M):
            return f"{name} {chip}: dynamic shared memory not .extern"
        report = subprocess.run(
            [ptxas, f"-arch={chip}", "-v", ptx, "-o", ptx + ".cubin"],
            capture_output=True, text=True)
        log = report.stdout + report.stderr
        if report.returncode:
            return f"{name} {chip}: ptxas failed: {log[-400:]}"
        bad = [l.strip() for l in log.splitlines()
               if re.search(r"[1-9]\d* bytes (stack frame|spill)", l)
               or re.search(r"\(C75\d\d\) Potential Performance Loss", l)]
        return f"{name} {chip}: {'; '.join(bad)}" if bad else None


def main():
    if sys.argv[1] == "--print":
        sys.stdout.write(dict(cases())[sys.argv[2]])
        return
    attn_opt, ptxas = sys.argv[1], sys.argv[2]
    jobs = int(sys.argv[sys.argv.index("-j") + 1]) if "-j" in sys.argv else 2
    # sm_89 differs from sm_80 only for fp8 (its MMA shape, pair cvt).
    work = [(n, t, c) for n, t in cases()
            for c in ("sm_80", "sm_89", "sm_90a") if c != "sm_89" or "fp8" in n]
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        results = list(pool.map(lambda w: check(attn_opt, ptxas, *w), work))
    failures = [r for r in results if r]
    for r in failures:
        print("FAIL", r)
    print(f"checked {len(work)} kernels, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

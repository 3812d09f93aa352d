"""Runs vLLM's full kernel-test grids (test/python/vllm_ported under
ATTN_MLIR_FULL_GRID=1, about 2,200 tests) on the GPU machine in parallel
pytest processes: building vLLM's inputs (caches of up to 32,768 blocks) and
checking them take seconds per test on one core.

    python3 bench/run_grid.py [--jobs N] [--shard I/N] [--record SPEC.jsonl]
                              [--time-limit S] [--out DIR] [--ids FILE]

Tests are dealt round-robin to N processes (the grid's expensive cases sit
together, so contiguous chunks would not balance). Each process keeps no
tracebacks (`--tb=line`: pytest holds every failure's frames, which ran a
2,200-test session out of memory). With --record, every specialization the
grid needs is appended to SPEC.jsonl and no kernel runs (ATTN_MLIR_DRY_RUN):
the first of the two device calls that a grid on fresh bundles takes.
With --time-limit the processes are stopped after S seconds and the report
covers the tests that finished (each process logs every test as it ends,
through ATTN_MLIR_GRID_LOG; see test/python/conftest.py) and counts the
rest as not run.
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = "test/python/vllm_ported"


def collect(env):
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q",
         "-p", "no:cacheprovider", TESTS],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if "::" in line]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--record", help="record specializations only (dry run)")
    ap.add_argument("--out", default=tempfile.mkdtemp(prefix="grid-"),
                    help="folder for the per-process logs")
    ap.add_argument("--shard", default="0/1",
                    help="I/N: run the I-th of N equal parts of the grid "
                         "(one part per device call)")
    ap.add_argument("--ids", help="a file of test ids (one per line) to run "
                                  "instead of the whole grid; --shard then "
                                  "splits these")
    ap.add_argument("--device", default="cuda",
                    help="ATTN_MLIR_TEST_DEVICE (cuda, or cpu)")
    ap.add_argument("--time-limit", type=float, default=None,
                    help="stop the processes after S seconds and report "
                         "what finished")
    args = ap.parse_args()

    env = dict(os.environ, ATTN_MLIR_FULL_GRID="1",
               # processes share the GPU: fewer, returnable segments
               PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True",
               ATTN_MLIR_TEST_DEVICE=args.device, PYTHONUNBUFFERED="1",
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               # pytest cuts the "FAILED id - reason" lines to the terminal
               # width: the grid's ids alone pass 80 columns.
               COLUMNS="1000")
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT / "python"), env.get("PYTHONPATH")) if p)
    ids = collect(env) if not args.ids else \
        [x for x in Path(args.ids).read_text().splitlines() if x.strip()]
    part, parts = (int(x) for x in args.shard.split("/"))
    ids = ids[part::parts]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"{len(ids)} tests in {args.jobs} processes; logs in {out}",
          flush=True)

    procs = []
    start = time.time()
    for j in range(args.jobs):
        chunk = ids[j::args.jobs]
        if not chunk:
            continue
        listing = out / f"ids_{j}.txt"
        listing.write_text("\n".join(chunk) + "\n")
        penv = dict(env, ATTN_MLIR_GRID_LOG=str(out / f"outcomes_{j}.txt"))
        (out / f"outcomes_{j}.txt").unlink(missing_ok=True)
        if args.record:
            penv.update(ATTN_MLIR_RECORD=str(out / f"spec_{j}.jsonl"),
                        ATTN_MLIR_DRY_RUN="1")
        log = open(out / f"pytest_{j}.log", "w")
        procs.append((subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "--tb=line", "-rf", *chunk],
            cwd=ROOT, env=penv, stdout=log, stderr=subprocess.STDOUT), log))
    for p, log in procs:
        try:
            left = None if args.time_limit is None else max(
                0.0, args.time_limit - (time.time() - start))
            p.wait(timeout=left)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        log.close()
    took = time.time() - start

    if args.record:
        seen, lines = set(), []
        for j in range(args.jobs):
            f = out / f"spec_{j}.jsonl"
            if f.exists():
                for line in f.read_text().splitlines():
                    if line not in seen:
                        seen.add(line)
                        lines.append(line)
        Path(args.record).write_text("\n".join(lines) + "\n")
        ended = sum(len((out / f"outcomes_{j}.txt").read_text().splitlines())
                    for j in range(len(procs))
                    if (out / f"outcomes_{j}.txt").exists())
        print(f"recorded {len(lines)} unique specializations of {ended} of "
              f"{len(ids)} tests into {args.record} in {took:.0f} s")
        return 0 if ended == len(ids) else 1

    # Per-test outcomes, written as each test ended (so a process stopped
    # at the time limit still counts what it ran).
    totals, failed, silent = {}, [], []
    for j in range(len(procs)):
        chunk = ids[j::args.jobs]
        f = out / f"outcomes_{j}.txt"
        lines = f.read_text().splitlines() if f.exists() else []
        for line in lines:
            outcome, rest = line.split(" ", 1)
            totals[outcome] = totals.get(outcome, 0) + 1
            if outcome == "failed":
                failed.append("FAILED " + rest)
        if len(lines) < len(chunk):
            why = ("stopped at the time limit" if args.time_limit
                   and took >= args.time_limit else
                   f"exit status {procs[j][0].returncode}")
            silent.append(f"process {j}: {why}; {len(chunk) - len(lines)} "
                          f"of its {len(chunk)} tests did not run")
            totals["not run"] = totals.get("not run", 0) + len(chunk) - len(lines)
    print(f"{len(ids)} tests in {took:.0f} s: " +
          ", ".join(f"{n} {w}" for w, n in sorted(totals.items())))
    for line in silent + failed:
        print(line)
    return 1 if failed or silent else 0


if __name__ == "__main__":
    sys.exit(main())

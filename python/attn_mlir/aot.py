"""Ahead-of-time GPU kernel bundles for machines without attn-opt.

    # 1. on a machine with attn-opt: record what a script needs
    ATTN_MLIR_RECORD=spec.jsonl [ATTN_MLIR_DRY_RUN=1] python my_script.py
    # 2. compile every recorded specialization for the GPU's chip
    python -m attn_mlir.aot --chip sm_90a --record spec.jsonl --out bundles/
    # 3. on the GPU machine
    ATTN_MLIR_BUNDLES=bundles/ python my_script.py

Or, instead of recording, from a model's attention configuration (a JSON
object of attn_mlir.precompile.AttentionConfig fields, or a list of them):
every kernel attn_mlir.vllm.unified_attention can call for it:
    python -m attn_mlir.aot --chip sm_90a --model model.json --out bundles/

Specializations that have no kernel for the chip (f32 queries on NVVM, say)
are reported and skipped; the exit status is 1 if any failed. Bundles
already in --out are kept if this attn-opt made them and they match their
manifest's hashes; others (older, or damaged: with a warning) are compiled
again.
"""

import argparse
import json
import shutil
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import _gpu, _log


def compile_all(texts, chip, out, jobs=2):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)

    def one(text):
        dest = out / _gpu.bundle_key(text, chip)
        start = time.perf_counter()
        if _gpu.is_current(dest):
            problem = _gpu.bundle_problem(dest)
            if problem is None:
                _log.kernel_ready(text, chip, "AOT bundle kept",
                                  time.perf_counter() - start, dest)
                return None
            warnings.warn(f"attn_mlir.aot: discarding the damaged bundle "
                          f"{dest}: {problem}; compiling it again",
                          _gpu.CacheWarning)
        # Made by another compiler, without hashes, or damaged.
        shutil.rmtree(dest, ignore_errors=True)
        try:
            _gpu.compile_bundle(text, chip, dest)
            _log.kernel_ready(text, chip, "AOT compiled",
                              time.perf_counter() - start, dest)
            return None
        except Exception as e:  # reported, not fatal for the others
            return f"{_gpu._describe(text)}: {str(e).splitlines()[-1][:300]}"

    with ThreadPoolExecutor(jobs) as pool:
        failures = [f for f in pool.map(one, texts) if f]
    return failures


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python -m attn_mlir.aot", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chip", required=True,
                    help="e.g. sm_80, sm_89, sm_90a (NVVM) or gfx90a, gfx942, "
                         "gfx1100 (ROCDL)")
    ap.add_argument("--record", nargs="+", default=[],
                    help="JSON-lines files written under ATTN_MLIR_RECORD")
    ap.add_argument("--model", nargs="+", default=[],
                    help="JSON files of attention configurations "
                         "(attn_mlir.precompile.AttentionConfig fields)")
    ap.add_argument("--out", required=True, help="bundle directory")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    if not args.record and not args.model:
        ap.error("give --record and/or --model")
    texts = []
    from . import precompile
    for model in args.model:
        configs = json.loads(Path(model).read_text())
        for cfg in configs if isinstance(configs, list) else [configs]:
            texts += precompile.specializations(
                precompile.AttentionConfig.from_dict(cfg))
    for rec in args.record:
        for line in Path(rec).read_text().splitlines():
            if line.strip():
                texts.append(json.loads(line)["mlir"])
    texts = list(dict.fromkeys(texts))
    failures = compile_all(texts, args.chip, args.out, args.jobs)
    print(f"{len(texts) - len(failures)} of {len(texts)} specializations "
          f"compiled for {args.chip} into {args.out}")
    for f in failures:
        print(f"  skipped: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

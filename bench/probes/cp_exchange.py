"""Where the context-parallel exchange's time goes (2 GPUs, NCCL): the
steps after the partials of bench_context_parallel.py's zigzag layout,
timed one by one on random partials of its shapes (bf16 [2 pieces, S, Hq,
128], f32 lse): merge_pieces (its merge_states and its logsumexp), the
all-gather of the partial and of the lse, the final merge_states, and the
whole merge_partials; beside them a device copy of the partial's bytes
and the all-gather's bus bandwidth. For reading, not a benchmark row.

    python3 bench/probes/cp_exchange.py [S[:Hq/Hk]] ...   (default 262144)
    ATTN_MLIR_RECORD=f.jsonl ATTN_MLIR_DRY_RUN=1 \
        python3 bench/probes/cp_exchange.py --dry-run
"""
import datetime
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from attn_mlir import distributed as cp  # noqa: E402
from attn_mlir import ops  # noqa: E402

D = 128
DRY = "--dry-run" in sys.argv


def timed(fn, device, reps=5):
    fn()
    out = []
    for _ in range(reps):
        if device.type == "cuda":
            torch.cuda.synchronize()
            dist.barrier()
            a, b = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize()
            out.append(a.elapsed_time(b))
        else:
            t = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t) * 1e3)
    return round(float(np.median(out)), 2)


def worker(rank, world, init, sizes):
    if DRY:
        device = torch.device("cpu")
        dist.init_process_group("gloo", init_method=init, rank=rank,
                                world_size=world,
                                timeout=datetime.timedelta(seconds=120))
    else:
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", init_method=init, rank=rank,
                                world_size=world, device_id=device)
    for spec in sizes:
        s, _, heads = spec.partition(":")
        s = int(s)
        hq = int((heads or "32/8").split("/")[0])
        g = torch.Generator(device=device).manual_seed(rank)
        part = torch.randn((2, s, hq, D), generator=g, device=device).to(
            torch.bfloat16)
        lse = torch.randn((2, s, hq), generator=g, device=device)
        one, one_lse = cp.merge_pieces(part, lse)
        out = torch.empty_like(one)
        gathered = torch.empty((world * s, hq, D), dtype=one.dtype,
                               device=device)
        lses = torch.empty((world * s, hq), dtype=torch.float32,
                           device=device)
        row = {"S": s, "Hq": hq, "partial_MB": one.numel() * 2 / 1e6}
        row["merge_pieces_ms"] = timed(lambda: cp.merge_pieces(part, lse),
                                       device)
        row["pieces_merge_states_ms"] = timed(
            lambda: ops.merge_states(part.permute(1, 2, 0, 3), out,
                                     segment_lse=lse.permute(1, 2, 0)),
            device)
        row["pieces_logsumexp_ms"] = timed(
            lambda: torch.logsumexp(lse, dim=0), device)
        row["all_gather_partial_ms"] = timed(
            lambda: dist.all_gather_into_tensor(gathered, one), device)
        row["all_gather_lse_ms"] = timed(
            lambda: dist.all_gather_into_tensor(lses, one_lse), device)
        g4 = gathered.view(world, s, hq, D).permute(1, 2, 0, 3)
        l3 = lses.view(world, s, hq).permute(1, 2, 0)
        row["final_merge_states_ms"] = timed(
            lambda: ops.merge_states(g4, out, segment_lse=l3), device)
        row["merge_partials_ms"] = timed(
            lambda: cp.merge_partials(one, one_lse, out), device)
        row["copy_partial_ms"] = timed(lambda: gathered[:s].copy_(one),
                                       device)
        if not DRY:
            sec = row["all_gather_partial_ms"] / 1e3
            row["all_gather_bus_GBps"] = round(
                one.numel() * 2 * (world - 1) / sec / 1e9, 1)
        if rank == 0:
            print(json.dumps(row), flush=True)
        del part, lse, one, out, gathered, lses
        if device.type == "cuda":
            torch.cuda.empty_cache()
    dist.destroy_process_group()


def main():
    sizes = [a for a in sys.argv[1:] if not a.startswith("--")] or \
        (["64", "96:8/2"] if DRY else ["262144", "1048576:8/2"])
    with tempfile.TemporaryDirectory() as d:
        torch.multiprocessing.spawn(worker, args=(2, f"file://{d}/init",
                                                  sizes), nprocs=2)


if __name__ == "__main__":
    main()

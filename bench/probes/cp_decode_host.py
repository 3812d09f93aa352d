"""Host time of context_parallel_decode (split, B=1) on two GPUs, and of
its pieces, with a cProfile of rank 0's calls: where an eager call's
host time goes. Calls are enqueued back to back without synchronization.
For reading, not a benchmark row.

    python3 bench/probes/cp_decode_host.py
    ATTN_MLIR_RECORD=f.jsonl ATTN_MLIR_DRY_RUN=1 python3 bench/probes/cp_decode_host.py
"""
import cProfile
import datetime
import io
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from attn_mlir import distributed as cp  # noqa: E402
from attn_mlir import ops  # noqa: E402

DRY = bool(os.environ.get("ATTN_MLIR_DRY_RUN"))
HQ, HK, D, PAGE, KEYS, SEGMENTS = 32, 8, 128, 16, 4096, 8


def per_call_us(fn, device, n=100):
    fn()
    if DRY:
        return float("nan")
    best = float("inf")
    for _ in range(5):
        torch.cuda.synchronize(device)
        dist.barrier()
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n * 1e6)
        torch.cuda.synchronize(device)
    return round(best, 1)


def worker(rank, world, init):
    if DRY:
        device = torch.device("cpu")
        dist.init_process_group("gloo", init_method=init, rank=rank,
                                world_size=world,
                                timeout=datetime.timedelta(seconds=60))
    else:
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", init_method=init, rank=rank,
                                world_size=world, device_id=device)
    bf = torch.bfloat16
    q = torch.randn((1, HQ, D), device=device).to(bf)
    pages = KEYS // PAGE
    kc = torch.randn((pages, PAGE, HK, D), device=device).to(bf)
    vc = torch.randn_like(kc)
    table = torch.arange(pages, dtype=torch.int32, device=device).view(1, -1)
    used = torch.tensor([KEYS], dtype=torch.int32, device=device)
    cu = torch.tensor([0, 1], dtype=torch.int32, device=device)
    out = torch.empty_like(q)
    segs = torch.empty((1, HQ, SEGMENTS, D), device=device)
    smax = torch.empty((1, HQ, SEGMENTS), device=device)
    ssum = torch.empty_like(smax)
    counters = torch.zeros((1, HQ), dtype=torch.int32, device=device)
    part = torch.empty_like(q)
    lse = torch.zeros((1, HQ), device=device)

    def whole():
        cp.context_parallel_decode(q, kc, vc, table, used, out, scale=0.1,
                                   num_segments=SEGMENTS)

    def unified():
        ops.unified(q, kc, vc, table, cu, used, segs, scale=0.1,
                    segment_max=smax, segment_sum=ssum, merged_out=part,
                    merge_counters=counters, lse=lse)

    def lse_of_segments():   # (what the fused merge's lse replaced)
        torch.logsumexp(smax + torch.log(ssum), dim=2)

    def merge():
        cp.merge_partials(part, lse, out)

    gathered = torch.empty((2, HQ, D), dtype=bf, device=device)

    def all_gather():
        dist.all_gather_into_tensor(gathered, part)

    # context_parallel_decode's own exchange: its packed buffer (partial
    # and lse) in one all-gather, and the merge of the gathered views.
    ws = cp._decode_workspace(device, bf, (1, HQ, D), 2, SEGMENTS)

    def packed_all_gather():
        dist.all_gather_into_tensor(ws.gathered, ws.packed)

    def merge_gathered():
        cp._merge_gathered(ws.gathered_part, ws.gathered_lse, out, None, None)

    rows = {name: per_call_us(fn, device) for name, fn in (
        ("context_parallel_decode (split)", whole), ("ops.unified (split, "
         "fused merge, lse)", unified), ("lse from the segments by torch "
                                         "ops (before)", lse_of_segments),
        ("merge_partials", merge), ("one all_gather_into_tensor",
                                    all_gather),
        ("all-gather of the packed partial and lse", packed_all_gather),
        ("merge_states of the gathered views", merge_gathered))}
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(50):
        whole()
    prof.disable()
    if not DRY:
        torch.cuda.synchronize(device)
    if rank == 0:
        for name, us in rows.items():
            print(f"{us:8.1f} us  {name}")
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
        print(text.getvalue()[:6000])
    dist.destroy_process_group()


def main():
    with tempfile.TemporaryDirectory() as d:
        torch.multiprocessing.spawn(worker, args=(2, f"file://{d}/init"),
                                    nprocs=2)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Context-parallel causal prefill across GPUs (attn_mlir.distributed)
against one GPU, in one run.

One sequence of S tokens, bf16, D = 128, causal. Every rank holds all the
queries and a share of the keys; the merged output lands on every rank.
For each S it times, with CUDA events around whole calls (median):
* one GPU: ops.flash over all the keys (rank 0 alone, the others wait);
* W GPUs, zigzag shards (rank r: chunks r and 2W-1-r of 2W, equal causal
  work): FlashPlan call = flash on each piece, all-gather of the partials
  and their lses, merge_states;
* W GPUs, shards in rank order (rank 0 the first half of the keys): the
  imbalance zigzag removes.
and checks the W-GPU outputs against the one-GPU output on rank 0. Each
rank's partial alone (flash over its pieces, no collective) is timed too,
so the time over the ideal (one GPU / W) splits into imbalance, shard
overheads and the exchange.

    python3 bench/bench_context_parallel.py [--sizes 131072,262144] [--heads 32/8]
    python3 bench/bench_context_parallel.py --decode   # B=1 decode over
        # 128k-1M cached keys: one GPU against context_parallel_decode
    ATTN_MLIR_RECORD=f.jsonl ATTN_MLIR_DRY_RUN=1 \
        python3 bench/bench_context_parallel.py --dry-run

--dry-run runs two gloo CPU processes on tiny sizes (records the kernels'
specializations for python -m attn_mlir.aot without a GPU). Prints one
JSON line per size and a table.
"""

import argparse
import datetime
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from attn_mlir import distributed as cp  # noqa: E402
from attn_mlir import ops  # noqa: E402

D = 128


def timed(fn, reps, device):
    """Median seconds of `reps` calls after one warm-up (CUDA events on a
    GPU; every rank's call, the slowest rank counting through the
    collectives inside)."""
    fn()
    times = []
    for _ in range(reps):
        if device.type == "cuda":
            torch.cuda.synchronize()
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b) / 1e3)
        else:
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
    return float(np.median(times))


def run_size(s, hq, hk, reps, device, rank, world):
    gen = torch.Generator(device=device).manual_seed(s)
    dtype = torch.bfloat16

    def randn(*shape):
        return torch.randn(shape, generator=gen, device=device,
                           dtype=torch.float32).to(dtype)
    q, k, v = randn(s, hq, D), randn(s, hk, D), randn(s, hk, D)
    scale = D ** -0.5
    cq = torch.tensor([0, s], dtype=torch.int32, device=device)
    row = {"S": s, "heads": f"{hq}/{hk}", "D": D, "gpus": world}

    full = torch.empty_like(q)
    dist.barrier()
    if rank == 0:
        one = timed(lambda: ops.flash(q, k, v, cq, cq, full, scale=scale,
                                      causal=True), reps, device)
        row["one_gpu_ms"] = one * 1e3
        row["one_gpu_tflops"] = 2.0 * s * s * D * hq / one / 1e12
    dist.barrier()

    for layout in ("zigzag", "rank_order"):
        rows, ck_s, start, lens = cp.split_keys(
            np.array([0, s]), world, rank, zigzag=layout == "zigzag")
        idx = torch.from_numpy(rows).to(device)
        k_s, v_s = k[idx].contiguous(), v[idx].contiguous()
        plan = cp.FlashPlan(np.array([0, s]), ck_s, causal=True,
                            kv_start=start, seqlens_k=lens, device=device)
        out = torch.full_like(q, float("nan"))
        took = timed(lambda: plan(q, k_s, v_s, out, scale=scale), reps,
                     device)
        # Each rank's own work alone (flash over its pieces and their local
        # merge, no collective): where the time over the ideal goes.
        alone = timed(lambda: plan.partial(q, k_s, v_s, scale=scale), reps,
                      device)
        mine = torch.tensor([took, alone], dtype=torch.float64,
                            device=device if device.type == "cuda" else "cpu")
        every = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(every, mine)
        row[f"{layout}_ms"] = max(float(e[0]) for e in every) * 1e3
        row[f"{layout}_partial_ms_per_rank"] = [round(float(e[1]) * 1e3, 1)
                                                for e in every]
        if rank == 0:
            row[f"{layout}_speedup"] = row["one_gpu_ms"] / row[f"{layout}_ms"]
            row[f"{layout}_max_err"] = \
                (out.float() - full.float()).abs().max().item()
    return row


PAGE = 16


def graphed(fn, device):
    """fn captured in a CUDA graph (after a warm-up on a side stream):
    its replay, as a serving loop runs a decode step."""
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream(device).wait_stream(side)
    torch.cuda.synchronize(device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def run_decode(s, hq, hk, reps, device, rank, world):
    """One decode query (B=1) over S cached keys in pages of PAGE: one GPU
    (ops.unified split into plan_segments' count, merged in the launch, as
    the vLLM drop-in runs it) against W GPUs holding S / W keys each
    (context_parallel_decode, split the same way over each shard, and in
    one pass). GB/s counts the K and V bytes read (all ranks' together)."""
    from attn_mlir import vllm
    gen = torch.Generator(device=device).manual_seed(s + 1)
    dtype = torch.bfloat16
    q = torch.randn((1, hq, D), generator=gen, device=device).to(dtype)
    scale = D ** -0.5
    sms = torch.cuda.get_device_properties(device).multi_processor_count \
        if device.type == "cuda" else None
    kv_bytes = 2 * s * hk * D * 2
    row = {"S": s, "heads": f"{hq}/{hk}", "D": D, "gpus": world,
           "decode": True}

    def cache(keys):
        pages = -(-keys // PAGE)
        kc = torch.randn((pages, PAGE, hk, D), generator=gen, device=device,
                         dtype=torch.float32).to(dtype)
        vc = torch.randn_like(kc)
        table = torch.arange(pages, dtype=torch.int32,
                             device=device).view(1, pages)
        used = torch.tensor([keys], dtype=torch.int32, device=device)
        return kc, vc, table, used

    cu = torch.tensor([0, 1], dtype=torch.int32, device=device)
    dist.barrier()
    if rank == 0:
        kc, vc, table, used = cache(s)
        n = vllm.plan_segments(1, s, PAGE, 1, hk, sms) or 2
        segs = torch.empty((1, hq, n, D), device=device)
        smax = torch.empty((1, hq, n), device=device)
        ssum = torch.empty_like(smax)
        counters = torch.zeros((1, hq), dtype=torch.int32, device=device)
        one = torch.empty_like(q)
        def step():
            ops.unified(q, kc, vc, table, cu, used, segs, scale=scale,
                        segment_max=smax, segment_sum=ssum, merged_out=one,
                        merge_counters=counters)
        took = timed(step, reps, device)
        row["one_gpu_us"] = took * 1e6
        row["one_gpu_segments"] = n
        row["one_gpu_GBps"] = kv_bytes / took / 1e9
        if device.type == "cuda":
            took = timed(graphed(step, device), reps, device)
            row["one_gpu_graph_us"] = took * 1e6
            row["one_gpu_graph_GBps"] = kv_bytes / took / 1e9
        del kc, vc
    dist.barrier()
    keys = s // world + (rank < s % world)
    kc, vc, table, used = cache(keys)
    n = vllm.plan_segments(1, keys, PAGE, 1, hk, sms) or 2
    runs = [("split", n, False), ("one_pass", None, False)]
    if device.type == "cuda":
        runs.insert(1, ("split_graph", n, True))
    for label, segments, graph in runs:
        out = torch.full_like(q, float("nan"))

        def step():
            cp.context_parallel_decode(q, kc, vc, table, used, out,
                                       scale=scale, num_segments=segments)
        took = timed(graphed(step, device) if graph else step, reps, device)
        if label == "split" and device.type == "cuda":
            # Host time of one eager call (queued work not waited for;
            # the row printed is rank 0's).
            host = []
            for _ in range(reps):
                torch.cuda.synchronize(device)
                t = time.perf_counter()
                step()
                host.append(time.perf_counter() - t)
            torch.cuda.synchronize(device)
            row["split_host_us"] = float(np.median(host)) * 1e6
        mine = torch.tensor([took], dtype=torch.float64, device=device)
        every = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(every, mine)
        worst = max(float(e[0]) for e in every)
        row[f"{label}_us"] = worst * 1e6
        row[f"{label}_GBps"] = kv_bytes / worst / 1e9
        if rank == 0:
            base = row["one_gpu_graph_us" if graph else "one_gpu_us"]
            row[f"{label}_speedup"] = base / row[f"{label}_us"]
            row[f"{label}_nan"] = bool(torch.isnan(out).any())
    row["split_segments"] = n
    return row


def worker(rank, world, init, args):
    if args.dry_run:
        device = torch.device("cpu")
        dist.init_process_group("gloo", init_method=init, rank=rank,
                                world_size=world,
                                timeout=datetime.timedelta(seconds=120))
    else:
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", init_method=init, rank=rank,
                                world_size=world, device_id=device)
    rows = []
    try:
        for spec in args.sizes.split(","):
            s, _, heads = spec.partition(":")
            hq, hk = (int(x) for x in (heads or args.heads).split("/"))
            s = int(s)
            reps = args.reps if s <= 262144 else max(1, args.reps - 1)
            row = run_decode(s, hq, hk, 5 * args.reps, device, rank, world) \
                if args.decode else run_size(s, hq, hk, reps, device, rank,
                                             world)
            if device.type == "cuda":   # the size's buffers, given back
                torch.cuda.empty_cache()
            if rank == 0:
                if device.type == "cuda":
                    row["gpu"] = torch.cuda.get_device_name(device)
                print(json.dumps(row), flush=True)
                rows.append(row)
    finally:
        dist.destroy_process_group()
    if rank == 0 and rows and not args.dry_run and args.decode:
        print()
        print(f"| ctx | heads | 1 GPU graph (us, GB/s) | {world} GPUs split, "
              f"graph (us, GB/s) | speedup | 1 GPU eager (us) | {world} GPUs "
              f"split, eager (us) | speedup | {world} GPUs one pass, eager "
              f"(us) | segments (1 GPU / a rank) |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in rows:
            print(f"| {r['S']} | {r['heads']} | {r['one_gpu_graph_us']:.1f}, "
                  f"{r['one_gpu_graph_GBps']:.0f} | {r['split_graph_us']:.1f}, "
                  f"{r['split_graph_GBps']:.0f} | "
                  f"{r['split_graph_speedup']:.2f}x | {r['one_gpu_us']:.1f} | "
                  f"{r['split_us']:.1f} | {r['split_speedup']:.2f}x | "
                  f"{r['one_pass_us']:.1f} | {r['one_gpu_segments']} / "
                  f"{r['split_segments']} |")
    elif rank == 0 and rows and not args.dry_run:
        print()
        print(f"| S | heads | 1 GPU (ms) | 1 GPU TFLOP/s | {world} GPUs "
              f"zigzag (ms) | speedup | {world} GPUs rank order (ms) | "
              f"speedup | max err (zigzag) |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in rows:
            print(f"| {r['S']} | {r['heads']} | {r['one_gpu_ms']:.1f} | "
                  f"{r['one_gpu_tflops']:.0f} | {r['zigzag_ms']:.1f} | "
                  f"{r['zigzag_speedup']:.2f}x | {r['rank_order_ms']:.1f} | "
                  f"{r['rank_order_speedup']:.2f}x | "
                  f"{r['zigzag_max_err']:.2e} |")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default=None,
                   help="comma-separated S[:Hq/Hk] (default 131072, 262144 "
                        "at --heads; 524288:8/2, 1048576:8/2)")
    p.add_argument("--heads", default="32/8", help="Hq/Hk (default 32/8)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--gpus", type=int, default=2)
    p.add_argument("--decode", action="store_true",
                   help="decode (one query over S cached keys, pages of 16) "
                        "instead of causal prefill")
    p.add_argument("--dry-run", action="store_true",
                   help="2 gloo CPU processes, tiny sizes (record only)")
    args = p.parse_args()
    if args.dry_run:
        args.sizes = args.sizes or "64,96:8/2"
        args.reps = 1
        world = 2
    else:
        args.sizes = args.sizes or (
            "131072,262144,524288,1048576" if args.decode else
            "131072,262144,524288:8/2,1048576:8/2")
        world = min(args.gpus, torch.cuda.device_count())
        if world < 2:
            raise SystemExit(f"needs 2 CUDA GPUs, found "
                             f"{torch.cuda.device_count()}")
    with tempfile.TemporaryDirectory() as d:
        torch.multiprocessing.spawn(worker, args=(world, f"file://{d}/init",
                                                  args), nprocs=world)


if __name__ == "__main__":
    main()

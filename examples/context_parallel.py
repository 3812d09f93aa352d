#!/usr/bin/env python3
"""Context-parallel causal prefill with attn_mlir.distributed.

Every rank builds the same varlen batch (same seed), keeps its contiguous
share of every sequence's keys (split_keys), and runs
context_parallel_flash: the merged output, on every rank, is checked
against ops.flash over all the keys on one device.

    torchrun --nproc-per-node 2 examples/context_parallel.py          # GPUs, NCCL
    torchrun --nproc-per-node 2 examples/context_parallel.py --cpu    # gloo
    python examples/context_parallel.py                               # 2 CPU ranks

Without torchrun's environment it spawns --ranks CPU processes itself.
"""

import argparse
import os
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


def batch(args, device):
    """A varlen batch with chunked-prefill sequences (fewer queries than
    keys) and a decode row, the same on every rank."""
    rng = np.random.default_rng(0)
    n = args.seq_len
    q_lens = [n, n // 4, 1, n // 2]
    k_lens = [n, n, n // 2 + 7, n]
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32

    def tensor(shape):
        return torch.from_numpy(rng.standard_normal(shape, np.float32)).to(
            device=device, dtype=dtype)

    q = tensor((sum(q_lens), args.q_heads, args.head_dim))
    k = tensor((sum(k_lens), args.kv_heads, args.head_dim))
    v = tensor((sum(k_lens), args.kv_heads, args.head_dim))
    cq = np.cumsum([0] + q_lens).astype(np.int32)
    ck = np.cumsum([0] + k_lens).astype(np.int32)
    return q, k, v, cq, ck


def run(args):
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.cpu or not torch.cuda.is_available():
        device = torch.device("cpu")
    else:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    q, k, v, cq, ck = batch(args, device)
    scale = args.head_dim ** -0.5

    rows, ck_shard, kv_start, seqlens_k = cp.split_keys(ck, world, rank)
    rows = torch.from_numpy(rows).to(device)
    k_shard, v_shard = k[rows].contiguous(), v[rows].contiguous()

    # Planned once per batch layout (host work); the call itself reads
    # nothing on the host, so it could be captured in a CUDA graph.
    plan = cp.FlashPlan(cq, ck_shard, causal=True, kv_start=kv_start,
                        seqlens_k=seqlens_k, device=device)
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[:2], dtype=torch.float32, device=device)
    plan(q, k_shard, v_shard, out, scale=scale, lse=lse)   # compiles, warms
    if device.type == "cuda":
        torch.cuda.synchronize()
    dist.barrier()
    start = time.perf_counter()
    plan(q, k_shard, v_shard, out, scale=scale, lse=lse)
    if device.type == "cuda":
        torch.cuda.synchronize()
    took = time.perf_counter() - start

    # The one-device result over every key.
    on = (lambda a: torch.from_numpy(a).to(device)) if device.type == "cuda" \
        else (lambda a: a)
    full = torch.empty_like(q)
    full_lse = torch.empty_like(lse)
    ops.flash(q, k, v, on(cq), on(ck), full, scale=scale, causal=True,
              lse=full_lse)
    err = (out.float() - full.float()).abs().max().item()
    finite = torch.isfinite(full_lse)
    lse_err = (lse - full_lse)[finite].abs().max().item()
    print(f"rank {rank}/{world} ({device}, {q.dtype}): {k_shard.shape[0]} of "
          f"{k.shape[0]} keys; max |out - one device| = {err:.2e}, "
          f"|lse - one device| = {lse_err:.2e}; call {took * 1e3:.2f} ms "
          f"(not a benchmark)", flush=True)
    tol = 2e-2 if q.dtype == torch.bfloat16 else 1e-4
    if err > tol or lse_err > 1e-3:
        raise SystemExit(f"rank {rank}: context-parallel result differs")


def spawned(rank, world, init, args):
    dist.init_process_group("gloo", init_method=init, rank=rank,
                            world_size=world)
    try:
        run(args)
    finally:
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cpu", action="store_true",
                   help="gloo on the CPU even where GPUs are present")
    p.add_argument("--ranks", type=int, default=2,
                   help="CPU processes to spawn without torchrun")
    p.add_argument("--seq-len", type=int, default=None,
                   help="keys per sequence (default 4096 on GPUs, 96 on CPU)")
    p.add_argument("--q-heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=64)
    args = p.parse_args()
    gpu = not args.cpu and torch.cuda.is_available() and \
        "RANK" in os.environ
    if args.seq_len is None:
        args.seq_len = 4096 if gpu else 96
    if "RANK" in os.environ:   # torchrun
        dist.init_process_group("nccl" if gpu else "gloo")
        try:
            run(args)
        finally:
            dist.destroy_process_group()
        return
    args.cpu = True
    with tempfile.TemporaryDirectory() as d:
        torch.multiprocessing.spawn(spawned, nprocs=args.ranks,
                                    args=(args.ranks, f"file://{d}/init",
                                          args))


if __name__ == "__main__":
    main()

"""attn_mlir.distributed across processes on real devices: NCCL on two
CUDA GPUs (skipped with fewer), and the same cases with gloo on the CPU.

Each rank runs, on its own device, bf16 context-parallel prefill (shards in
rank order, zigzag pieces, non-causal, sinks with the merged lse) and paged
decode over pages spread round-robin; on CUDA also a FlashPlan call
captured in a CUDA graph (with its NCCL all-gathers) and replayed on new
queries. Every rank's output must equal rank 0's bitwise and match the
float64 reference and the one-device ops.flash / ops.unified result.
"""

import datetime
import os
import tempfile

import numpy as np
import pytest

from reference import attend

torch = pytest.importorskip("torch", reason="attn_mlir.distributed needs torch")
if os.environ.get("ATTN_MLIR_TEST_DEVICE") == "cuda":
    pytest.skip("runs its own processes on their own devices; the conftest's "
                "GPU redirection copies numpy operands only",
                allow_module_level=True)

from attn_mlir import distributed as cp  # noqa: E402
from attn_mlir import ops  # noqa: E402

HQ, HK, D, PAGE = 8, 2, 128, 16
SCALE = D ** -0.5
# Chunked prefill (fewer queries than keys), a decode row, a full prefill
# and more queries than keys.
Q_LENS, K_LENS = [96, 1, 203, 70], [250, 133, 203, 41]
DECODE_K_LENS = [300, 17, 64]
# bf16 inputs, bf16 P on tensor cores, bf16 outputs: against float64.
TOL_REF = 3e-2
# The merged result against one device: two bf16 roundings of the same
# values (partials, then output) and a reordered f32 sum.
TOL_ONE = 2e-2
CASES = ["rank_order", "zigzag", "full", "sinks_lse", "decode",
         "decode_split"]


def bf16(a):
    """float32 numpy -> torch bf16 (and the rounded values as float64)."""
    t = torch.from_numpy(a).to(torch.bfloat16)
    return t, t.double().numpy()


def inputs(name):
    rng = np.random.default_rng(CASES.index(name))
    decoding = name in ("decode", "decode_split")
    k_lens = DECODE_K_LENS if decoding else K_LENS
    q_lens = [1] * len(k_lens) if decoding else Q_LENS
    q = rng.standard_normal((sum(q_lens), HQ, D)).astype(np.float32)
    k = rng.standard_normal((sum(k_lens), HK, D)).astype(np.float32)
    v = rng.standard_normal((sum(k_lens), HK, D)).astype(np.float32)
    sinks = rng.standard_normal(HQ).astype(np.float32) \
        if name == "sinks_lse" else None
    cq = np.cumsum([0] + q_lens).astype(np.int32)
    ck = np.cumsum([0] + k_lens).astype(np.int32)
    return q, k, v, cq, ck, sinks


def reference(name):
    q, k, v, cq, ck, sinks = inputs(name)
    q, k, v = (bf16(x)[1] for x in (q, k, v))
    causal = name not in ("full", "decode", "decode_split")
    out = np.zeros(q.shape)
    g = HQ // HK
    for b in range(len(cq) - 1):
        lq, lk = cq[b + 1] - cq[b], ck[b + 1] - ck[b]
        i, j = np.arange(lq)[:, None], np.arange(lk)[None, :]
        vis = (j <= lk - lq + i) if causal else np.ones((lq, lk), bool)
        for h in range(HQ):
            out[cq[b]:cq[b + 1], h] = attend(
                q[cq[b]:cq[b + 1], h], k[ck[b]:ck[b + 1], h // g],
                v[ck[b]:ck[b + 1], h // g], SCALE, vis,
                sink=None if sinks is None else float(sinks[h]))
    return out


def sees_a_key(name):
    """Per query row: does it see at least one key?"""
    _, _, _, cq, ck, sinks = inputs(name)
    causal = name not in ("full", "decode", "decode_split")
    rows = []
    for b in range(len(cq) - 1):
        lq, lk = cq[b + 1] - cq[b], ck[b + 1] - ck[b]
        i = np.arange(lq)   # causal row i sees keys j <= lk - lq + i
        rows.append(lk - lq + i >= 0 if causal else np.full(lq, lk > 0))
    seen = np.concatenate(rows)
    return seen | (sinks is not None)


def prefill(name, world, rank, device):
    q, k, v, cq, ck, sinks = inputs(name)
    q, k, v = (bf16(x)[0].to(device) for x in (q, k, v))
    causal = name != "full"
    zigzag = name == "zigzag"
    rows, ck_s, start, lens = cp.split_keys(ck, world, rank, zigzag=zigzag)
    idx = torch.from_numpy(rows).to(device)
    k_s, v_s = k[idx].contiguous(), v[idx].contiguous()
    out = torch.full(q.shape, float("nan"), dtype=q.dtype, device=device)
    lse = torch.full(q.shape[:2], float("nan"), device=device)
    sinks_t = None if sinks is None else torch.from_numpy(sinks).to(device)
    # Rank-order positions gathered by the plan; explicit ones for zigzag.
    positions = dict(kv_start=start, seqlens_k=lens) if zigzag else {}
    cp.context_parallel_flash(q, k_s, v_s, cq, ck_s, out, scale=SCALE,
                              causal=causal, sinks=sinks_t, lse=lse,
                              **positions)
    one = torch.full_like(out, float("nan"))
    cq_d, ck_d = (torch.from_numpy(a).to(device) for a in (cq, ck))
    # (flash has no sinks: with sinks, `one` is the result without them.)
    ops.flash(q, k, v, cq_d, ck_d, one, scale=SCALE, causal=causal)
    return out, lse, one


def decode(world, rank, device, num_segments=None):
    """Pages of every sequence round-robin over the ranks; a NaN block 0
    that no table names. num_segments: each rank's walk split (decode_split:
    4 segments of a rank's 150, 9 and 32 keys)."""
    q, k, v, cq, ck, _ = inputs("decode" if num_segments is None else
                                "decode_split")
    q, k, v = (bf16(x)[0] for x in (q, k, v))
    mine, pages = [], []
    for b in range(len(ck) - 1):
        keys = np.arange(ck[b], ck[b + 1])
        keys = keys[(np.arange(keys.size) // PAGE) % world == rank]
        mine.append(keys)
        pages.append(-(-keys.size // PAGE))
    kc = torch.zeros((sum(pages) + 1, PAGE, HK, D), dtype=torch.bfloat16)
    vc = torch.zeros_like(kc)
    kc[0] = vc[0] = float("nan")
    table = torch.zeros((len(mine), max(pages + [1])), dtype=torch.int32)
    nxt = 1
    for b, keys in enumerate(mine):
        for p in range(pages[b]):
            chunk = torch.from_numpy(keys[p * PAGE:(p + 1) * PAGE])
            kc[nxt, :chunk.numel()] = k[chunk]
            vc[nxt, :chunk.numel()] = v[chunk]
            table[b, p] = nxt
            nxt += 1
    seqused = torch.tensor([x.size for x in mine], dtype=torch.int32)
    q = q.to(device)
    out = torch.full(q.shape, float("nan"), dtype=q.dtype, device=device)
    lse = torch.full(q.shape[:2], float("nan"), device=device)
    cp.context_parallel_decode(q, kc.to(device), vc.to(device),
                               table.to(device), seqused.to(device), out,
                               scale=SCALE, lse=lse, num_segments=num_segments)
    one = torch.full_like(out, float("nan"))
    kf, vf = k.to(device), v.to(device)
    ops.flash(q, kf, vf, torch.from_numpy(cq).to(device),
              torch.from_numpy(ck).to(device), one, scale=SCALE)
    return out, lse, one


def graph_replay(world, rank, device):
    """A zigzag FlashPlan call captured once (flash, all-gathers, merge) and
    replayed on new queries: the replay equals an eager call on them."""
    q, k, v, cq, ck, _ = inputs("zigzag")
    q, k, v = (bf16(x)[0].to(device) for x in (q, k, v))
    rows, ck_s, start, lens = cp.split_keys(ck, world, rank, zigzag=True)
    idx = torch.from_numpy(rows).to(device)
    k_s, v_s = k[idx].contiguous(), v[idx].contiguous()
    plan = cp.FlashPlan(cq, ck_s, causal=True, kv_start=start,
                        seqlens_k=lens, device=device)
    out = torch.empty_like(q)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):   # warm-up (loads kernels) off capture
        plan(q, k_s, v_s, out, scale=SCALE)
    torch.cuda.current_stream(device).wait_stream(side)
    torch.cuda.synchronize(device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        plan(q, k_s, v_s, out, scale=SCALE)
    gen = torch.Generator(device=device).manual_seed(7)
    q.copy_(torch.randn(q.shape, generator=gen, device=device))
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize(device)
    eager = torch.empty_like(out)
    plan(q, k_s, v_s, eager, scale=SCALE)
    return out, eager


def worker(rank, world, init, outdir, backend):
    if backend == "nccl":
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
        torch.distributed.init_process_group(
            "nccl", init_method=init, rank=rank, world_size=world,
            timeout=datetime.timedelta(seconds=120), device_id=device)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(1)
        torch.distributed.init_process_group(
            "gloo", init_method=init, rank=rank, world_size=world,
            timeout=datetime.timedelta(seconds=120))
    results = {}
    try:
        for name in CASES:
            got = decode(world, rank, device) if name == "decode" else \
                decode(world, rank, device, 4) if name == "decode_split" \
                else prefill(name, world, rank, device)
            for key, t in zip(("out", "lse", "one"), got):
                results[f"{name}/{key}"] = t.float().cpu().numpy()
        if backend == "nccl":
            for key, t in zip(("graph", "eager"),
                              graph_replay(world, rank, device)):
                results[key] = t.float().cpu().numpy()
    finally:
        np.savez(os.path.join(outdir, f"rank{rank}.npz"), **results)
        torch.distributed.destroy_process_group()


def _cpu_kernels():
    """CPU kernels are compiled where they run: a GPU machine without their
    toolchain (kernels from AOT bundles, or attn-opt alone) runs the NCCL
    cases only."""
    from attn_mlir._toolchain import cpu_toolchain_problem
    return cpu_toolchain_problem()


def _backends():
    why = _cpu_kernels()
    yield pytest.param("gloo", id="gloo-cpu", marks=pytest.mark.skipif(
        why is not None, reason=f"no CPU kernels here: {why}"))
    ok = torch.cuda.is_available() and torch.cuda.device_count() >= 2 and \
        torch.distributed.is_nccl_available()
    yield pytest.param("nccl", id="nccl-2gpu", marks=pytest.mark.skipif(
        not ok, reason=f"needs 2 CUDA GPUs and NCCL (this machine has "
                       f"{torch.cuda.device_count()} CUDA devices)"))


@pytest.fixture(scope="module", params=list(_backends()))
def ranks(request):
    backend, world = request.param, 2
    if backend == "gloo" and not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed has no gloo backend")
    with tempfile.TemporaryDirectory() as d:
        torch.multiprocessing.spawn(
            worker, args=(world, f"file://{d}/init", d, backend),
            nprocs=world)
        yield backend, [dict(np.load(os.path.join(d, f"rank{r}.npz")))
                        for r in range(world)]


@pytest.mark.parametrize("name", CASES)
def test_ranks_merge_to_the_one_device_result(ranks, name):
    backend, results = ranks
    out = results[0][f"{name}/out"]
    for r in range(1, len(results)):   # the same merge of the same data
        assert np.array_equal(results[r][f"{name}/out"], out)
        assert np.array_equal(results[r][f"{name}/lse"],
                              results[0][f"{name}/lse"])
    ref = reference(name)
    np.testing.assert_allclose(out, ref, rtol=TOL_REF, atol=TOL_REF)
    one = results[0][f"{name}/one"]
    if name == "sinks_lse":   # applied once: unlike the result without
        assert not np.allclose(out, one, atol=1e-2)
    else:
        np.testing.assert_allclose(out, one, rtol=TOL_ONE, atol=TOL_ONE)
    # The merged lse is finite exactly on the rows that see a key (causal
    # rows before their sequence's first key see none: -inf).
    lse = results[0][f"{name}/lse"]
    assert (np.isfinite(lse) == sees_a_key(name)[:, None]).all()
    assert not np.isnan(lse).any()


def test_graph_replay_equals_eager(ranks):
    backend, results = ranks
    if backend != "nccl":
        pytest.skip("CUDA graphs: the NCCL run only")
    for r in results:
        assert not np.isnan(r["graph"]).any()
        np.testing.assert_array_equal(r["graph"], r["eager"])

"""attn_mlir.vllm on torch CUDA tensors.

Each entry point runs once on host arrays and once on CUDA copies of them;
the two outputs must agree. The CUDA call runs under torch's sync debug mode
set to "error", so any host synchronization inside it (a device-to-host
read of an index tensor, say) fails the test; the split-KV case is also
captured in a CUDA graph and replayed. The host halves always run (so a
CPU-only machine records every specialization the GPU halves need); the
CUDA halves skip without torch or a GPU.
"""

import os

import numpy as np
import pytest

from attn_mlir import vllm
from paged import block_table
from reference import DTYPES, check, f64

try:
    import torch
    HAVE_CUDA = torch.cuda.is_available()
except ImportError:
    HAVE_CUDA = False

needs_cuda = pytest.mark.skipif(not HAVE_CUDA, reason="needs torch with CUDA")


def bf16(rng, *shape):
    return rng.standard_normal(shape).astype(DTYPES["bf16"])


# ml_dtypes types torch.from_numpy does not take, by their bits:
# (numpy dtype, storage, torch dtype name).
_BITS = [(np.dtype(DTYPES["bf16"]), np.int16, "bfloat16"),
         (np.dtype(DTYPES["f8E4M3FN"]), np.uint8, "float8_e4m3fn"),
         (np.dtype(DTYPES["f8E5M2"]), np.uint8, "float8_e5m2")]


def to_cuda(x):
    """A numpy array (bf16 and fp8 as ml_dtypes) as a CUDA tensor of the
    same dtype."""
    x = np.ascontiguousarray(x)
    for dtype, store, name in _BITS:
        if x.dtype == dtype:
            return torch.from_numpy(x.view(store)).cuda().view(
                getattr(torch, name))
    return torch.from_numpy(x).cuda()


def to_host(t):
    """A CUDA tensor as a numpy array of the same dtype (bf16 and fp8 as
    ml_dtypes)."""
    for dtype, store, name in _BITS:
        if t.dtype == getattr(torch, name):
            return t.view(getattr(torch, np.dtype(store).name)).cpu() \
                .numpy().view(dtype)
    return t.cpu().numpy()


def run_cuda(fn, *args, **kwargs):
    """fn(*args) with every array argument on the GPU, under sync checks."""
    conv = lambda a: to_cuda(a) if isinstance(a, np.ndarray) else (
        tuple(conv(x) for x in a) if isinstance(a, tuple) else a)
    dev_args = [conv(a) for a in args]
    fn(*dev_args, **kwargs)  # loads the kernels (may read files, sync)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        result = fn(*dev_args, **kwargs)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    return dev_args, result


def agree(host, dev, what):
    check(to_host(dev), f64(host), "bf16", what)


def prefix_inputs(rng):
    hq, hk, d, bs, x = 8, 2, 64, 16, 8
    q_lens, ctx = np.array([5, 70, 1]), np.array([40, 0, 129])
    starts = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    table, nb = block_table(rng, ctx, bs)
    t = int(starts[-1])
    return (bf16(rng, t, hq, d), bf16(rng, t, hk, d), bf16(rng, t, hk, d),
            np.zeros((t, hq, d), DTYPES["bf16"]), "auto",
            bf16(rng, nb, hk, d // x, bs, x), bf16(rng, nb, hk, d, bs),
            table, starts, (ctx + q_lens).astype(np.int32), 0, 0, 1.0, 1.0)


def test_prefix_prefill_cuda():
    args = prefix_inputs(np.random.default_rng(1))
    vllm.context_attention_fwd(*args)
    if not HAVE_CUDA:
        pytest.skip("needs torch with CUDA")
    dev, _ = run_cuda(vllm.context_attention_fwd, *args)
    agree(args[3], dev[3], "context_attention_fwd")


@pytest.mark.parametrize("sm_scale", [None, -0.1])
def test_prefix_prefill_qkv_views_cuda(sm_scale):
    # vLLM passes q, k and v as views of one projection [tokens, hq + 2 hk,
    # d]: a token's stride is not q's row. Heads of 128 on sm_90a: Q and the
    # new tokens' K/V by TMA (their maps take the strides); a negative scale
    # negates the loaded Q in shared memory.
    rng = np.random.default_rng(3)
    hq, hk, d, bs, x = 8, 2, 128, 16, 8
    q_lens, ctx = np.array([5, 150, 1]), np.array([40, 0, 129])
    starts = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    table, nb = block_table(rng, ctx, bs)
    t = int(starts[-1])
    qkv = bf16(rng, t, hq + 2 * hk, d)
    k_cache, v_cache = bf16(rng, nb, hk, d // x, bs, x), bf16(rng, nb, hk, d, bs)
    rest = (table, starts, (ctx + q_lens).astype(np.int32), 0, 0, 1.0, 1.0)
    views = lambda a: (a[:, :hq], a[:, hq:hq + hk], a[:, hq + hk:])
    out = np.zeros((t, hq, d), DTYPES["bf16"])
    vllm.context_attention_fwd(*views(qkv), out, "auto", k_cache, v_cache,
                               *rest, sm_scale=sm_scale)
    if not HAVE_CUDA:
        pytest.skip("needs torch with CUDA")
    dev_qkv = to_cuda(qkv)
    assert dev_qkv[:, :hq].stride(0) == (hq + 2 * hk) * d
    dev_out = torch.full((t, hq, d), float("nan"), dtype=torch.bfloat16,
                         device="cuda")
    vllm.context_attention_fwd(*views(dev_qkv), dev_out, "auto",
                               to_cuda(k_cache), to_cuda(v_cache),
                               *(to_cuda(a) if isinstance(a, np.ndarray) else a
                                 for a in rest), sm_scale=sm_scale)
    torch.cuda.synchronize()
    agree(out, dev_out, "context_attention_fwd on views of qkv")


def unified_inputs(rng, q_lens, k_lens):
    hq, hk, d, bs = 8, 2, 128, 16
    cu = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    table, nb = block_table(rng, k_lens, bs)
    t = int(cu[-1])
    return (bf16(rng, t, hq, d), bf16(rng, nb, bs, hk, d),
            bf16(rng, nb, bs, hk, d), np.zeros((t, hq, d), DTYPES["bf16"]),
            cu, int(max(q_lens)), np.asarray(k_lens, np.int32),
            int(max(k_lens)), 0.125, True, (-1, -1), table, 0.0, None, None,
            None)


def test_unified_mixed_cuda():
    args = unified_inputs(np.random.default_rng(2), [1, 33, 1], [300, 33, 17])
    sinks = np.linspace(-1, 1, 8).astype(np.float32)
    vllm.unified_attention(*args, sinks=sinks)
    if not HAVE_CUDA:
        pytest.skip("needs torch with CUDA")
    dev, _ = run_cuda(vllm.unified_attention, *args, sinks=to_cuda(sinks))
    agree(args[3], dev[3], "unified_attention")


def test_unified_split_kv_cuda_graph():
    args = unified_inputs(np.random.default_rng(3), [1, 1, 1, 1],
                          [700, 1500, 64, 999])
    vllm.unified_attention(*args)  # decode-only, long: split-KV + merge
    if not HAVE_CUDA:
        pytest.skip("needs torch with CUDA")
    dev, _ = run_cuda(vllm.unified_attention, *args)
    agree(args[3], dev[3], "unified_attention split-KV")
    out = dev[3]
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        vllm.unified_attention(*dev)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    agree(args[3], out, "unified_attention split-KV graph replay")


def gqa_batch(rng, cache, q_lens, k_lens):
    """vllm.unified_attention's arguments (a list) for GQA 32/8, D=128,
    pages of 16: sequences of q_lens queries over k_lens keys, a bf16 or
    fp8 cache (descale 0.5)."""
    hq, hk, d, bs = 32, 8, 128, 16
    cu = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    k_lens = np.asarray(k_lens, np.int32)
    table, nb = block_table(rng, list(k_lens), bs)
    kc = rng.standard_normal((nb, bs, hk, d)).astype(DTYPES[cache])
    vc = rng.standard_normal((nb, bs, hk, d)).astype(DTYPES[cache])
    descale = np.full(1, 0.5, np.float32) if cache != "bf16" else None
    t = int(cu[-1])
    return [bf16(rng, t, hq, d), kc, vc, np.zeros((t, hq, d), DTYPES["bf16"]),
            cu, max(q_lens), k_lens, int(k_lens.max()), 0.088, True,
            (-1, -1), table, 0.0, None, descale, descale]


def agree_then_replay(args, other_lens, what):
    """The call on the GPU agrees with the host; then a CUDA graph of it,
    replayed with `other_lens` keys (same bucket), agrees with the host
    run of those."""
    dev, _ = run_cuda(vllm.unified_attention, *args)
    agree(args[3], dev[3], what)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        vllm.unified_attention(*dev)
    other = np.asarray(other_lens, np.int32)
    args[6] = other
    args[3] = np.zeros_like(args[3])
    vllm.unified_attention(*args)
    dev[6].copy_(torch.from_numpy(other))
    dev[3].fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    agree(args[3], dev[3], f"{what}, replay")


@pytest.mark.parametrize("cache", ["bf16", "f8E4M3FN"])
def test_unified_mixed_decode_split_cuda_graph(cache):
    """A mixed batch with few long decodes: the drop-in splits its decode
    op's keys (partials by sequence, merged in the launch) beside the
    prefill op; GPU against host, then a graph replayed at other key
    counts (the prefills' and the decodes' own)."""
    from attn_mlir import ops
    args = gqa_batch(np.random.default_rng(40 + len(cache)), cache,
                     [1, 70, 1, 40, 1, 3], [1500, 70, 900, 300, 1, 1200])
    with ops.collect_specializations() as texts:
        vllm.unified_attention(*args)
    assert "sequence_partials" in texts[0]
    vllm.unified_attention(*args)
    if not HAVE_CUDA:
        pytest.skip("needs torch with CUDA")
    agree_then_replay(args, [1400, 70, 1000, 300, 7, 1190],
                      f"mixed batch, split decodes, {cache}")


@pytest.mark.parametrize("cache", ["bf16", "f8E4M3FN"])
def test_unified_speculative_split_cuda_graph(cache):
    """Speculative decode (4, 3 and 1 query tokens a sequence) over long
    keys: the drop-in splits the one op's keys; GPU against host, then a
    graph replayed at other key counts."""
    args = gqa_batch(np.random.default_rng(50 + len(cache)), cache,
                     [4, 3, 1, 4], [1500, 901, 1200, 37])
    vllm.unified_attention(*args)
    if not HAVE_CUDA:
        pytest.skip("needs torch with CUDA")
    agree_then_replay(args, [1400, 1000, 1190, 20],
                      f"speculative decode split, {cache}")


@pytest.mark.parametrize("cache,batch", [("bf16", 5), ("bf16", 9),
                                         ("f8E4M3FN", 9), ("f8E4M3FN", 20)])
def test_unified_planned_split_counts_cuda(cache, batch):
    """Decode batches whose planned segment count is off the powers of two
    (GQA 32/8, D=128: 6 and 3 on 132 SMs over bf16, 5 over fp8) or, over
    fp8 on sm_90, splits more programs than SMs (20 sequences: 160, in
    two); the host run plans for two programs an SM and may count
    otherwise. Contexts end inside pages."""
    rng = np.random.default_rng(20 + batch)
    hq, hk, d, bs = 32, 8, 128, 16
    k_lens = rng.integers(700, 1025, batch).astype(np.int32)
    k_lens[0] = 1024
    cu = np.arange(batch + 1, dtype=np.int32)
    table, nb = block_table(rng, list(k_lens), bs)
    kc = rng.standard_normal((nb, bs, hk, d)).astype(DTYPES[cache])
    vc = rng.standard_normal((nb, bs, hk, d)).astype(DTYPES[cache])
    descale = (np.full(1, 0.5, np.float32) if cache == "f8E4M3FN" else None)
    args = (bf16(rng, batch, hq, d), kc, vc,
            np.zeros((batch, hq, d), DTYPES["bf16"]), cu, 1, k_lens, 1024,
            0.088, True, (-1, -1), table, 0.0, None, descale, descale)
    vllm.unified_attention(*args)
    if not HAVE_CUDA:
        pytest.skip("needs torch with CUDA")
    dev, _ = run_cuda(vllm.unified_attention, *args)
    agree(args[3], dev[3], f"unified_attention planned split, {cache}")


def test_flash_cuda():
    rng = np.random.default_rng(4)
    hq, hk, d = 8, 4, 96
    cu = np.array([0, 100, 101, 300], np.int32)
    t = int(cu[-1])
    q, k, v = bf16(rng, t, hq, d), bf16(rng, t, hk, d), bf16(rng, t, hk, d)
    o = np.zeros((t, hq, d), DTYPES["bf16"])
    vllm.triton_attention(q, k, v, o, cu, cu, 199, 199, True, 0.1)
    if not HAVE_CUDA:
        pytest.skip("needs torch with CUDA")
    dev, _ = run_cuda(vllm.triton_attention, q, k, v, o, cu, cu, 199, 199,
                      True, 0.1)
    agree(o, dev[3], "triton_attention")


def test_blocksparse_cuda():
    rng = np.random.default_rng(5)
    hq, hk, d, bs = 4, 2, 64, 16
    ck = np.array([0, 70, 71, 135], np.int32)
    t = int(ck[-1])
    q, k, v = bf16(rng, t, hq, d), bf16(rng, t, hk, d), bf16(rng, t, hk, d)
    rows = 5
    crow = np.array([[0, 1, 3, 5, 7, 9]], np.int32)
    col = np.array([[0, 0, 1, 1, 2, 0, 3, 2, 4]], np.int32)
    assert crow.shape[1] == rows + 1
    host = vllm.blocksparse_flash_attn_varlen_fwd(
        q, k, v, ck, None, 0.125, (crow, col), block_size=bs)
    if not HAVE_CUDA:
        pytest.skip("needs torch with CUDA")
    _, dev = run_cuda(vllm.blocksparse_flash_attn_varlen_fwd, q, k, v, ck,
                      None, 0.125, (crow, col), block_size=bs)
    agree(host, dev, "blocksparse_flash_attn_varlen_fwd")


@needs_cuda
def test_index_tensors_must_be_int32_on_the_device():
    args = list(unified_inputs(np.random.default_rng(6), [2], [9]))
    dev = [to_cuda(a) if isinstance(a, np.ndarray) else a for a in args]
    dev[4] = dev[4].long()
    with pytest.raises(ValueError, match="cu_seqlens_q: expected int32"):
        vllm.unified_attention(*dev)
    dev[4] = torch.from_numpy(args[4])  # on the host
    with pytest.raises(ValueError, match="cu_seqlens_q: expected an int32 "
                                         "tensor on cuda"):
        vllm.unified_attention(*dev)

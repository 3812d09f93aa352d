"""The vLLM drop-in captured in a CUDA graph and replayed as vLLM's
runner replays it: the same buffers every step, new query values and new
sequence lengths written into them between replays (lengths up to the
max_seqlen_k the graph was captured with). Decode, speculative decode (4
query tokens per sequence) and a mixed batch of prefill and decode rows
(over an fp8 cache too: its decodes and prefills run as two ops, and the
replays also move query rows between sequences, so that a sequence
changes class between replays); each replay must equal an eager call on the same inputs (the kernels and
the split-KV plan are the same, so bit for bit). Skipped without a CUDA
GPU, except in a recording run (ATTN_MLIR_TEST_RECORD_ALL with the dry
run), which makes each case's eager call on host tensors so that the GPU
run finds its kernels prepared."""

import numpy as np
import pytest

from reference import RECORDING_ONLY

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() and not RECORDING_ONLY:
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from attn_mlir import vllm  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"

HQ, HK, D, PAGE = 32, 8, 128, 16


def batch(q_lens, max_keys, seed=0, cache="bf16"):
    """Static buffers of a paged batch: q, caches (bf16, or e4m3 with
    descales), block table, offsets, lengths and out, on the GPU."""
    rng = np.random.default_rng(seed)
    b = len(q_lens)
    pages = -(-max_keys // PAGE)
    g = torch.Generator(device=DEV).manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=g, device=DEV).to(
            torch.bfloat16)
    kc, vc = randn(b * pages, PAGE, HK, D), randn(b * pages, PAGE, HK, D)
    table = torch.as_tensor(rng.permutation(b * pages).reshape(b, pages)
                            .astype(np.int32), device=DEV)
    cu = torch.as_tensor(np.cumsum([0, *q_lens]).astype(np.int32),
                         device=DEV)
    used = torch.full((b,), max_keys, dtype=torch.int32, device=DEV)
    q = randn(sum(q_lens), HQ, D)
    out = torch.empty_like(q)
    kd = vd = None
    if cache == "fp8":
        kc, vc = kc.to(torch.float8_e4m3fn), vc.to(torch.float8_e4m3fn)
        kd = torch.full((1,), 0.5, dtype=torch.float32, device=DEV)
        vd = torch.full((1,), 1.5, dtype=torch.float32, device=DEV)
    return dict(q=q, kc=kc, vc=vc, table=table, cu=cu, used=used, out=out,
                max_q=max(q_lens), max_keys=max_keys, kd=kd, vd=vd)


def step(bt, out):
    vllm.unified_attention(bt["q"], bt["kc"], bt["vc"], out, bt["cu"],
                           bt["max_q"], bt["used"], bt["max_keys"],
                           D ** -0.5, True, (-1, -1), bt["table"], 0.0, None,
                           bt["kd"], bt["vd"])


CASES = {
    "decode": ([1] * 8, 4096),
    "speculative": ([4] * 8, 4096),
    "mixed": ([200, 1, 1, 64, 1, 1, 1, 1], 2048),
    "mixed_fp8": ([200, 1, 1, 64, 1, 1, 1, 1], 2048),
}


@pytest.mark.parametrize("name", list(CASES))
def test_replays_with_new_lengths_equal_eager(name):
    q_lens, max_keys = CASES[name]
    bt = batch(q_lens, max_keys, cache="fp8" if "fp8" in name else "bf16")
    if DEV != "cuda":   # recording: the call the graph captures
        step(bt, bt["out"])
        return
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step(bt, bt["out"])   # loads kernels, sizes the workspace
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step(bt, bt["out"])
    rng = np.random.default_rng(1)
    g = torch.Generator(device=DEV).manual_seed(2)
    seen = set()
    for _ in range(3):
        # New lengths (each at least its query count: vLLM's invariant)
        # and new queries, written into the captured buffers; a mixed
        # batch's query counts rotate over its sequences (the same tokens).
        if name.startswith("mixed"):
            q_lens = q_lens[1:] + q_lens[:1]
            bt["cu"].copy_(torch.tensor(np.cumsum([0, *q_lens]),
                                        dtype=torch.int32))
        lens = [int(rng.integers(q, max_keys + 1)) for q in q_lens]
        seen.add(tuple(lens))
        bt["used"].copy_(torch.tensor(lens, dtype=torch.int32))
        bt["q"].copy_(torch.randn(bt["q"].shape, generator=g,
                                  device=DEV))
        bt["out"].fill_(float("nan"))
        graph.replay()
        eager = torch.full_like(bt["out"], float("nan"))
        step(bt, eager)
        torch.cuda.synchronize()
        assert not torch.isnan(bt["out"]).any()
        assert torch.equal(bt["out"], eager), f"lengths {lens}"
    assert len(seen) == 3

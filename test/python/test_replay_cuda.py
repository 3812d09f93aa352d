"""attn_mlir._replay on a GPU: a call replayed from its signature's plan
writes what the full path writes for the same arguments, bit for bit, for
every op a decode or prefill step makes (unified one-pass and split-KV
with merge_states, the vLLM drop-in's split decode, flash). Each case runs
three times on fresh data of one signature: the first call builds the
plan, the second is replayed, and the third runs the full path again
(plans cleared) on the second's inputs.
Skipped without a CUDA GPU (test_replay.py checks the same logic on the
CPU with stand-in launches), except in a recording run
(ATTN_MLIR_TEST_RECORD_ALL with the dry run), which makes each case's
calls on host tensors so that the GPU run finds its kernels prepared."""

import numpy as np
import pytest

from reference import RECORDING_ONLY

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() and not RECORDING_ONLY:
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from attn_mlir import _replay, ops, vllm  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"

HQ, HK, D, PAGE = 32, 8, 128, 16


def decode_inputs(seed, batch=8, ctx=1024):
    g = torch.Generator(device=DEV).manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=g, device=DEV).to(
            torch.bfloat16)
    pages = ctx // PAGE
    kc, vc = randn(batch * pages, PAGE, HK, D), randn(batch * pages, PAGE,
                                                       HK, D)
    perm = np.random.default_rng(seed).permutation(batch * pages)
    table = torch.as_tensor(perm.reshape(batch, pages).astype(np.int32),
                            device=DEV)
    cu = torch.arange(batch + 1, dtype=torch.int32, device=DEV)
    used = torch.full((batch,), ctx - seed, dtype=torch.int32, device=DEV)
    return randn(batch, HQ, D), kc, vc, table, cu, used


def one_pass(seed):
    q, kc, vc, table, cu, used = decode_inputs(seed)
    out = torch.full_like(q, float("nan"))
    ops.unified(q, kc, vc, table, cu, used, out, scale=D ** -0.5)
    return out


def split(seed, segments=4):
    q, kc, vc, table, cu, used = decode_inputs(seed)
    part = torch.full((q.shape[0], HQ, segments, D), float("nan"),
                      device=DEV)
    smax = torch.full(part.shape[:3], float("nan"), device=DEV)
    ssum = torch.full_like(smax, float("nan"))
    out = torch.full_like(q, float("nan"))
    ops.unified(q, kc, vc, table, cu, used, part, scale=D ** -0.5,
                segment_max=smax, segment_sum=ssum)
    ops.merge_states(part, out, segment_max=smax, segment_sum=ssum)
    return out


def drop_in(seed):
    """The vLLM drop-in's decode step: its own planner and workspace, its
    inner unified and merge_states calls replayed."""
    q, kc, vc, table, cu, used = decode_inputs(seed)
    out = torch.full_like(q, float("nan"))
    vllm.unified_attention(q, kc, vc, out, cu, 1, used, 1024, D ** -0.5,
                           True, (-1, -1), table, 0.0, None, None, None)
    return out


def drop_in_keywords(seed):
    """vLLM's call: every argument by keyword, its split-KV plan's buffers
    given, and max_seqlen_k one larger each step (same planner bucket)."""
    q, kc, vc, table, cu, used = decode_inputs(seed)
    out = torch.full_like(q, float("nan"))
    ones = torch.ones(q.shape[0], HK, device=DEV)
    vllm.unified_attention(
        q=q, k=kc, v=vc, out=out, cu_seqlens_q=cu, max_seqlen_q=1,
        seqused_k=used, max_seqlen_k=1000 + seed, softmax_scale=D ** -0.5,
        causal=True, window_size=(-1, -1), block_table=table, softcap=0,
        q_descale=None, k_descale=ones, v_descale=ones, seq_threshold_3D=8,
        num_par_softmax_segments=4,
        softmax_segm_output=torch.full((8, HQ, 4, D), float("nan"),
                                       device=DEV),
        softmax_segm_max=torch.full((8, HQ, 4), float("nan"), device=DEV),
        softmax_segm_expsum=torch.full((8, HQ, 4), float("nan"),
                                       device=DEV))
    return out


def flash(seed, heads=16, tokens=(300, 1000, 57)):
    g = torch.Generator(device=DEV).manual_seed(seed)
    n = sum(tokens)
    q, k, v = (torch.randn(n, heads, D, generator=g, device=DEV).to(
        torch.bfloat16) for _ in range(3))
    cu = torch.as_tensor(np.cumsum([0, *tokens]).astype(np.int32),
                         device=DEV)
    out = torch.full_like(q, float("nan"))
    ops.flash(q, k, v, cu, cu, out, scale=D ** -0.5, causal=True)
    return out


@pytest.mark.parametrize("case", [one_pass, split, drop_in,
                                  drop_in_keywords, flash],
                         ids=lambda f: f.__name__)
def test_replay_writes_what_the_full_path_writes(case, monkeypatch):
    monkeypatch.setattr(_replay, "_PLANS", {})
    if DEV != "cuda":   # recording: one call of the signature
        case(1)
        return
    first = case(1)
    assert _replay._PLANS and all(plan is not None
                                  for matches in _replay._PLANS.values()
                                  for _, plan in matches)
    replayed = case(2)
    torch.cuda.synchronize()
    _replay._PLANS.clear()
    full = case(2)
    torch.cuda.synchronize()
    assert not torch.isnan(replayed).any()
    assert torch.equal(replayed, full)
    assert not torch.equal(replayed, first)   # other data, other result

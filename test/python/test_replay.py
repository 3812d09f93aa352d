"""attn_mlir._replay: a GPU call whose signature was seen before launches
from the arguments' pointers without rebuilding the specialization.

No GPU is needed: torch CPU tensors stand in for CUDA ones (the device
lookups answer "cuda:0"), the first call's kernel launch is replaced by a
recorder that returns two stand-in kernels, and replays are recorded where
they would launch. What is checked is what the replay hands to the
launcher, against what the full path hands it for the same arguments.
"""

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from attn_mlir import _abi, _gpu, _launch, _replay, ops  # noqa: E402

if os.environ.get("ATTN_MLIR_TEST_DEVICE") == "cuda":
    pytest.skip("simulates a GPU with CPU tensors; the conftest's GPU "
                "redirection would run them", allow_module_level=True)


class _Kernel:
    def __init__(self, params):
        self.record = {"params": [{"arg": i} for i in params]}


@pytest.fixture
def gpu(monkeypatch):
    """CPU tensors that the call paths take for CUDA ones. Returns the
    launches: ("full", values) from the full path, ("replay", values) from
    replays, values being what each kernel would receive."""
    launches = []
    fake = torch.device("cuda", 0)
    real_device_of = _abi.device_of

    def device_of(x):
        return fake if _abi.is_torch(x) else real_device_of(x)

    from attn_mlir import vllm
    monkeypatch.setattr(ops, "device_of", device_of)
    monkeypatch.setattr(vllm, "device_of", device_of)
    # The drop-in's fused-merge counters on the stand-in GPU.
    monkeypatch.setitem(vllm._MERGE_COUNTERS, fake,
                        torch.zeros(1 << 16, dtype=torch.int32))
    monkeypatch.setattr(_abi, "device_of", device_of)
    monkeypatch.setattr(_replay, "_CPU_AS_GPU", True)
    monkeypatch.setattr(ops, "_TORCH_OPERANDS", {})
    monkeypatch.setattr(_replay, "_PLANS", {})

    def run_gpu(self, text):
        n = len(self.params)
        # Two kernels, each taking every parameter in another order.
        kernels = [_Kernel(range(n)), _Kernel(reversed(range(n)))]
        values = [p[3] for p in self.params]
        launches.append(("full", _flat(kernels, values)))
        _replay.captured(self, kernels)

    class Prepared:
        """_gpu.PreparedLaunch's stand-in: what the kernel would get."""

        def __init__(self, kernel, args, sources):
            self.args, self.sources = args, sources

        def flat(self, ptrs):
            return [(a.name, ptrs[s], a.shape, a.strides, a.dtype)
                    if s is not None else a
                    for a, s in zip(self.args, self.sources)]

    def launch_prepared(prepared, ptrs, dev, name, side=None):
        launches.append(("replay", [v for p in prepared
                                    for v in p.flat(ptrs)]))

    monkeypatch.setattr(ops._Call, "_run_gpu", run_gpu)
    monkeypatch.setattr(_gpu, "PreparedLaunch", Prepared)
    monkeypatch.setattr(_launch, "_launch_prepared", launch_prepared)
    for var in ("ATTN_MLIR_RECORD", "ATTN_MLIR_DRY_RUN", "ATTN_MLIR_VALIDATE"):
        monkeypatch.delenv(var, raising=False)
    return launches


def _flat(kernels, values):
    """What each kernel receives: Views as (name, ptr, shape, strides,
    dtype), scalars as they are."""
    out = []
    for k in kernels:
        for p in k.record["params"]:
            v = values[p["arg"]]
            out.append((v.name, v.ptr, v.shape, v.strides, v.dtype)
                       if isinstance(v, _abi.View) else v)
    return out


def decode(seed=0, batch=3):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, 8, 64, generator=g).to(torch.bfloat16)
    cache = torch.randn(16, 16, 2, 64, generator=g).to(torch.bfloat16)
    table = torch.arange(batch * 4, dtype=torch.int32).view(batch, 4)
    cu = torch.arange(batch + 1, dtype=torch.int32)
    used = torch.full((batch,), 50, dtype=torch.int32)
    out = torch.empty(batch, 8, 64, dtype=torch.bfloat16)
    return q, cache, cache.clone(), table, cu, used, out


def test_second_call_replays_with_its_own_pointers(gpu):
    a, b = decode(0), decode(1)   # same signature, other memory
    ops.unified(*a, scale=0.125, softcap=30.0)
    ops.unified(*b, scale=0.125, softcap=30.0)
    assert [kind for kind, _ in gpu] == ["full", "replay"]
    # The replay gives the kernels what the full path gives for b.
    _replay._PLANS.clear()
    ops.unified(*b, scale=0.125, softcap=30.0)
    assert gpu[2][0] == "full" and gpu[1][1] == gpu[2][1]
    ptrs = {v[1] for v in gpu[1][1] if isinstance(v, tuple)}
    assert {t.data_ptr() for t in b} <= ptrs
    assert not {t.data_ptr() for t in a} & ptrs


def test_other_values_or_shapes_take_the_full_path(gpu):
    ops.unified(*decode(0), scale=0.125)
    ops.unified(*decode(1), scale=0.25)           # another scale
    ops.unified(*decode(2, batch=4), scale=0.125)  # another shape
    ops.unified(*decode(3), scale=0.125, causal=False)
    assert [kind for kind, _ in gpu] == ["full"] * 4
    ops.unified(*decode(4), scale=0.25)
    assert gpu[-1][0] == "replay"
    assert 0.25 in gpu[-1][1]


def test_pointer_checks_fall_back_to_the_full_path(gpu):
    q, kc, vc, table, cu, used, out = decode(0)
    ops.unified(q, kc, vc, table, cu, used, out, scale=0.125)
    # An output that shares memory with an input: the replay declines and
    # the full path names the problem.
    q2 = torch.empty(3, 8, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="out: shares memory with q"):
        ops.unified(q2, kc, vc, table, cu, used, q2, scale=0.125)
    # A misaligned pointer (a view 2 bytes in): the full path's check.
    buf = torch.empty(3 * 8 * 64 + 1, dtype=torch.bfloat16)
    odd = buf[1:].view(3, 8, 64)
    if odd.data_ptr() % 16:
        with pytest.raises(ValueError):
            ops.unified(odd, kc, vc, table, cu, used, out, scale=0.125)
    assert [kind for kind, _ in gpu] == ["full"]


def test_environments_that_need_the_full_path(gpu, monkeypatch, tmp_path):
    args = decode(0)
    ops.merge_states(torch.zeros(3, 8, 4, 64), args[-1],
                     segment_max=torch.zeros(3, 8, 4),
                     segment_sum=torch.ones(3, 8, 4))
    monkeypatch.setenv("ATTN_MLIR_RECORD", str(tmp_path / "r.jsonl"))
    ops.merge_states(torch.zeros(3, 8, 4, 64), args[-1],
                     segment_max=torch.zeros(3, 8, 4),
                     segment_sum=torch.ones(3, 8, 4))
    assert (tmp_path / "r.jsonl").read_text().count("attn.merge_states") == 1
    monkeypatch.delenv("ATTN_MLIR_RECORD")
    ops.merge_states(torch.zeros(3, 8, 4, 64), args[-1],
                     segment_max=torch.zeros(3, 8, 4),
                     segment_sum=torch.ones(3, 8, 4))
    assert [kind for kind, _ in gpu] == ["full", "full", "replay"]


def test_collecting_specializations_launches_nothing(gpu):
    """precompile's collect_specializations: a signature with a plan is
    still collected, not launched."""
    ops.unified(*decode(0), scale=0.125)
    with ops.collect_specializations() as texts:
        ops.unified(*decode(1), scale=0.125)
    assert [kind for kind, _ in gpu] == ["full"]
    assert len(texts) == 1 and "attn.unified" in texts[0]


def test_host_arrays_are_never_replayed(gpu, monkeypatch):
    """numpy operands and CPU tensors: their contents are checked on every
    call, so they never replay (numpy: no signature; a host tensor: no
    plan, and its device is part of the match)."""
    assert _replay._signature("unified", (np.zeros(3),), {}) is None
    assert _replay._signature("unified", (), {"x": {"a": 1}}) is None
    monkeypatch.setattr(_replay, "_CPU_AS_GPU", False)
    for seed in (0, 1, 2):
        ops.unified(*decode(seed), scale=0.125)
    assert [kind for kind, _ in gpu] == ["full"] * 3


def test_signature_tells_values_types_and_places_apart():
    """Equal-comparing values of other types, None against a value, an
    argument by position against the same by keyword: other signatures."""
    def key(*args, **kwargs):
        return _replay._signature("unified", args, kwargs)[0]
    assert key(1, 1.0, True) != key(True, 1, 1.0)
    assert key(None, 1) != key(1, None)
    assert key(None) != key(None, None)
    assert key(1, 2) != key(1, b=2) != key(a=1, b=2)
    assert key((1, None)) != key((None, 1))
    assert key(1, (2, 3)) == key(1, (2, 3))
    # Window sizes (two ints: a fast path) against equal-comparing pairs of
    # other types, and the same pair inside a list.
    assert len({key((1, 2)), key((1.0, 2)), key((True, 2)), key([1, 2])}) == 4


def test_signature_layouts_alternate():
    """An op's last layout is reused only for the same argument types: calls
    that alternate types (and keyword names) keep their own keys."""
    def key(*args, **kwargs):
        return _replay._signature("unified", args, kwargs)[0]
    first, second, third = key(1, 2.0), key(1.0, 2), key(1, b=2.0)
    assert len({first, second, third}) == 3
    for _ in range(2):
        assert (key(1, 2.0), key(1.0, 2), key(1, b=2.0)) == \
            (first, second, third)


_WORKSPACE = {}


@_replay.replayable("test_entry")
def _entry(q, kc, vc, table, cu, used):
    """An entry point of the drop-in's kind: an operand derived from an
    argument at an offset (the last tokens of q), and a buffer of its own
    (a cached output)."""
    out = _WORKSPACE.setdefault(tuple(q.shape), torch.empty(
        q.shape[0] - 1, *q.shape[1:], dtype=q.dtype))
    ops._unified(q[1:], kc, vc, table, cu, used, out, scale=0.125)


def test_entry_points_replay_offsets_and_own_buffers(gpu):
    q, kc, vc, table, cu, used, _ = decode(0, batch=4)
    cu3, used3, table3 = cu[:4], used[:3], table[:3]
    _entry(q, kc, vc, table3, cu3, used3)
    q2, kc2, vc2, _, _, _, _ = decode(1, batch=4)
    _entry(q2, kc2, vc2, table3, cu3, used3)
    assert [kind for kind, _ in gpu] == ["full", "replay"]
    replay = gpu[1][1]
    _replay._PLANS.clear()
    _entry(q2, kc2, vc2, table3, cu3, used3)
    assert gpu[2][0] == "full" and gpu[2][1] == replay
    ptrs = {v[0]: v[1] for v in replay if isinstance(v, tuple)}
    assert ptrs["q"] == q2[1:].data_ptr() != q2.data_ptr()
    assert ptrs["out"] == _WORKSPACE[tuple(q.shape)].data_ptr()


def test_vllm_drop_in_replays(gpu):
    """The drop-in's decode step (here one pass: more programs than the
    planner splits) replays its inner call with the new arguments."""
    from attn_mlir import vllm
    batch = 67   # 67 x 8 KV heads: past the split threshold
    g = torch.Generator().manual_seed(3)

    def step(seed):
        q = torch.randn(batch, 16, 64, generator=g).to(torch.bfloat16)
        cache = torch.randn(batch * 2, 16, 8, 64, generator=g).to(
            torch.bfloat16)
        table = torch.arange(batch * 2, dtype=torch.int32).view(batch, 2)
        cu = torch.arange(batch + 1, dtype=torch.int32)
        used = torch.full((batch,), 20, dtype=torch.int32)
        out = torch.empty_like(q)
        return (q, cache, cache.clone(), out, cu, 1, used, 20, 0.125, True,
                (-1, -1), table, 0.0, None, None, None)
    first, second = step(0), step(1)
    vllm.unified_attention(*first)
    vllm.unified_attention(*second)
    assert [kind for kind, _ in gpu] == ["full", "replay"]
    _replay._PLANS.clear()
    vllm.unified_attention(*second)
    assert gpu[2] == ("full", gpu[1][1])


@_replay.replayable("test_shared")
def _shared(q, kc, vc, table, cu, used, out):
    """k and v caches that share memory, and an operand derived from them
    (a view of v): where it lies next time is not in the signature."""
    ops._unified(q, kc, vc[:], table, cu, used, out, scale=0.125)


def test_operands_inside_several_arguments_are_not_replayed(gpu):
    q, kc, _, table, cu, used, out = decode(0)
    kv = torch.stack([kc, kc.clone()], dim=1)   # [blocks, 2, ...]
    for _ in range(2):
        _shared(q, kv[:, 0], kv[:, 1], table, cu, used, out)
    assert [kind for kind, _ in gpu] == ["full", "full"]


def _decode_keywords(seed, batch=3, max_seqlen_k=5000):
    """vLLM's call of the drop-in: every argument by keyword, its split-KV
    plan's buffers given (a decode-only batch under seq_threshold_3D)."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, 8, 64, generator=g).to(torch.bfloat16)
    cache = torch.randn(64, 16, 2, 64, generator=g).to(torch.bfloat16)
    return dict(
        q=q, k=cache, v=cache.clone(), out=torch.empty_like(q),
        cu_seqlens_q=torch.arange(batch + 1, dtype=torch.int32),
        max_seqlen_q=1,
        seqused_k=torch.full((batch,), 40, dtype=torch.int32),
        max_seqlen_k=max_seqlen_k, softmax_scale=0.125, causal=True,
        window_size=(-1, -1),
        block_table=torch.arange(batch * 4, dtype=torch.int32).view(batch, 4),
        softcap=0, q_descale=None, k_descale=torch.ones(batch, 2),
        v_descale=torch.ones(batch, 2), seq_threshold_3D=8,
        num_par_softmax_segments=4,
        softmax_segm_output=torch.empty(8, 8, 4, 64),
        softmax_segm_max=torch.empty(8, 8, 4),
        softmax_segm_expsum=torch.empty(8, 8, 4))


def test_vllm_keyword_calls_replay(gpu):
    """Today's vLLM passes every argument by keyword: such calls replay
    too (they once never did: the first positional argument was looked for
    and none was there), as does the op call of their split form (which
    merges its segments in the same launch)."""
    from attn_mlir import vllm
    vllm.unified_attention(**_decode_keywords(0))
    second = _decode_keywords(1)
    vllm.unified_attention(**second)
    assert [kind for kind, _ in gpu] == ["full", "replay"]
    _replay._PLANS.clear()
    vllm.unified_attention(**second)
    assert gpu[2][0] == "full"
    assert gpu[1][1] == gpu[2][1]
    ptrs = {v[1] for v in gpu[1][1] if isinstance(v, tuple)}
    assert second["q"].data_ptr() in ptrs
    assert second["out"].data_ptr() in ptrs   # merged_out
    assert second["softmax_segm_output"].data_ptr() in ptrs


def test_growing_max_seqlen_k_replays_within_its_bucket(gpu, monkeypatch):
    """A decode loop's max_seqlen_k grows by one a step; it only feeds the
    split-KV planner, so the signature keeps its bucket
    (vllm.max_seqlen_k_bucket): calls replay until the planner could
    decide otherwise, and a replay launches what the full path does."""
    from attn_mlir import vllm
    # The drop-in's workspace and SM count on the stand-in GPU.
    monkeypatch.setitem(vllm._WORKSPACES, torch.device("cuda", 0),
                        torch.empty(1 << 20))
    monkeypatch.setattr(vllm, "_sm_count", lambda dev: 132)

    def step(seed, max_seqlen_k):
        kw = _decode_keywords(seed, max_seqlen_k=max_seqlen_k)
        for name in ("seq_threshold_3D", "num_par_softmax_segments",
                     "softmax_segm_output", "softmax_segm_max",
                     "softmax_segm_expsum"):
            del kw[name]   # the drop-in's own planner and workspace
        return kw
    last = step(2, 1151)
    vllm.unified_attention(**step(0, 1100))
    vllm.unified_attention(**step(1, 1101))
    vllm.unified_attention(**last)
    assert [kind for kind, _ in gpu] == ["full"] + ["replay"] * 2
    replayed = gpu[-1][1]
    _replay._PLANS.clear()
    vllm.unified_attention(**last)
    assert gpu[-1][1] == replayed
    # 1152 keys: another bucket (9 x 128), another signature.
    del gpu[:]
    vllm.unified_attention(**step(1, 1152))
    assert [kind for kind, _ in gpu] == ["full"]


def test_plan_segments_reads_max_seqlen_k_through_its_bucket():
    """max_seqlen_k_bucket's premise: plan_segments, given the batch as
    unified_attention gives it, decides the same for every max_seqlen_k of
    one bucket."""
    from attn_mlir import vllm
    for num_seqs in (1, 2, 3, 8, 16, 17, 33, 64, 132, 200):
        for kv_heads in (1, 2, 8):
            for sms in (None, 78, 132):
                for q in (0, 1, 2):
                    seen = {}
                    for k in list(range(0, 600)) + list(range(600, 20000, 7)):
                        got = vllm.plan_segments(q, k, 16, num_seqs=num_seqs,
                                                 num_kv_heads=kv_heads,
                                                 num_sms=sms)
                        b = vllm.max_seqlen_k_bucket(k)
                        assert seen.setdefault(b, got) == got, \
                            (num_seqs, kv_heads, sms, q, k)


@pytest.mark.parametrize("guards", [True, False],
                         ids=["torch-guards", "python"])
def test_tensor_match_tells_layouts_apart(guards, monkeypatch):
    """Both ways of matching a call's tensors (torch's C++ guards where
    they pass their self-test, else Python) accept the same metadata and
    reject every other dtype, shape, stride, rank or requires_grad."""
    if guards:
        if not _replay._guards_work():
            pytest.skip("this torch's TensorGuards are not usable")
    else:
        monkeypatch.setattr(_replay, "_GUARDS", False)
    a, b = torch.zeros(4, 6), torch.zeros(3, dtype=torch.int32)
    match = _replay._tensor_match([a, b])
    assert match([torch.ones(4, 6), torch.ones(3, dtype=torch.int32)])
    for other in [(a.double(), b), (a[:, :5], b), (torch.zeros(6, 4).t(), b),
                  (a.view(24), b), (a, b.view(3, 1)), (a, b[:2]),
                  (torch.zeros(4, 6, requires_grad=True), b),
                  (torch.zeros(8, 6)[::2], b)]:
        assert not match(list(other))
    # One tensor in two places: only one tensor in those places again.
    match = _replay._tensor_match([a, b, a])
    x = torch.ones(4, 6)
    assert match([x, b, x])
    assert not match([x, b, torch.ones(4, 6)])


def test_one_tensor_in_two_places_replays_only_so(gpu):
    """A plan takes each pointer from the first place its tensor was in: a
    call that passed one tensor as both caches must not replay for one that
    passes two (the v cache's pointer would be the k cache's), while one
    tensor in both places again does."""
    q, kc, vc, table, cu, used, out = decode(0)
    ops.unified(q, kc, kc, table, cu, used, out, scale=0.125)
    ops.unified(q, kc, vc, table, cu, used, out, scale=0.125)
    assert [kind for kind, _ in gpu] == ["full", "full"]
    ops.unified(q, vc, vc, table, cu, used, out, scale=0.125)
    assert gpu[-1][0] == "replay"
    ptrs = [v[1] for v in gpu[-1][1] if isinstance(v, tuple)
            and v[0] in ("k_cache", "v_cache")]
    assert ptrs and set(ptrs) == {vc.data_ptr()}


def test_one_scale_tensor_for_both_caches_replays(gpu):
    """One descale tensor given as k_descale and v_descale (a single KV
    scale) replays: the scale views lie inside both arguments, and each
    operand's name says which one it comes from. (Such calls once took the
    full path every time: 163 us of host time a call on an H200,
    bench/results/2026-11-29-h200-decode-key-split.md.) Two tensors are
    another match, replayed each from its own parameter."""
    q, kc, vc, table, cu, used, out = decode(0)
    k8, v8 = (c.to(torch.float8_e4m3fn) for c in (kc, vc))
    d, d2 = torch.full((1,), 0.5), torch.full((1,), 0.25)
    for _ in range(2):
        ops.unified(q, k8, v8, table, cu, used, out, scale=0.125,
                    k_descale=d, v_descale=d)
    assert [kind for kind, _ in gpu] == ["full", "replay"]
    ops.unified(q, k8, v8, table, cu, used, out, scale=0.125, k_descale=d,
                v_descale=d2)
    assert gpu[-1][0] == "full"
    ops.unified(q, k8, v8, table, cu, used, out, scale=0.125, k_descale=d2,
                v_descale=d)
    assert gpu[-1][0] == "replay"
    ptrs = {v[0]: v[1] for v in gpu[-1][1] if isinstance(v, tuple)}
    assert ptrs["k_descale"] == d2.data_ptr()
    assert ptrs["v_descale"] == d.data_ptr()


def test_tensors_inside_tuples_are_not_replayed():
    """A plan takes pointers from top-level arguments only."""
    t = torch.zeros(3)
    assert _replay._arg_key((t, t)) is _replay._NO
    assert _replay._arg_key([1, (2, None)]) is not _replay._NO


def test_random_call_sequences_launch_what_the_full_path_launches(
        gpu, monkeypatch):
    """A random sequence of calls over a few signatures (batch, softcap,
    one tensor as both caches or two, positional or keyword arguments, the
    drop-in's growing max_seqlen_k): every call that replays hands the
    kernels what the full path hands them for the same arguments."""
    from attn_mlir import vllm
    monkeypatch.setitem(vllm._WORKSPACES, torch.device("cuda", 0),
                        torch.empty(1 << 20))
    monkeypatch.setattr(vllm, "_sm_count", lambda dev: 132)
    rng = np.random.default_rng(7)
    calls = []
    for _ in range(40):
        batch = int(rng.choice([2, 3]))
        q, kc, vc, table, cu, used, out = decode(int(rng.integers(1 << 30)),
                                                 batch=batch)
        if rng.random() < 0.3:
            vc = kc
        kind = rng.choice(["positional", "keyword", "drop-in"])
        if kind == "drop-in":
            args = (q, kc, vc, out, cu, 1, used, int(rng.integers(40, 600)),
                    0.125, True, (-1, -1), table, 0.0, None, None, None)
            kwargs = {}
            fn = vllm.unified_attention
        else:
            extra = {"softcap": 30.0} if rng.random() < 0.5 else {}
            fn = ops.unified
            if kind == "positional":
                args = (q, kc, vc, table, cu, used, out)
                kwargs = dict(scale=0.125, **extra)
            else:
                args = ()
                kwargs = dict(q=q, k_cache=kc, v_cache=vc, block_table=table,
                              cu_seqlens_q=cu, seqused_k=used, out=out,
                              scale=0.125, **extra)
        start = len(gpu)
        fn(*args, **kwargs)
        calls.append((fn, args, kwargs, gpu[start:]))
    replayed = [c for c in calls if c[3] and c[3][0][0] == "replay"]
    assert len(replayed) > 10
    for fn, args, kwargs, launches in replayed:
        _replay._PLANS.clear()
        start = len(gpu)
        fn(*args, **kwargs)
        full = gpu[start:]
        assert all(kind == "full" for kind, _ in full)
        assert [v for _, values in launches for v in values] == \
            [v for _, values in full for v in values]


def test_merge_counters_outgrown_are_kept(monkeypatch):
    """The drop-in's fused-merge counters: zeros of at least
    MIN_MERGE_COUNTERS; a batch that needs more gets a larger buffer and
    the outgrown one stays alive (a captured CUDA graph may point into
    it)."""
    from attn_mlir import vllm
    dev = torch.device("cpu")   # the logic alone; kernels never run here
    monkeypatch.setattr(vllm, "_MERGE_COUNTERS", {})
    monkeypatch.setattr(vllm, "_OUTGROWN", [])
    small = vllm._merge_counters(dev, 8, 32)
    assert small.shape == (8, 32) and small.dtype == torch.int32
    assert not small.any()
    first = vllm._MERGE_COUNTERS[dev]
    assert first.numel() == vllm.MIN_MERGE_COUNTERS
    assert vllm._merge_counters(dev, 16, 32).data_ptr() == first.data_ptr()
    big = vllm._merge_counters(dev, vllm.MIN_MERGE_COUNTERS // 16, 32)
    assert big.data_ptr() != first.data_ptr() and not big.any()
    assert vllm._OUTGROWN == [first]


def test_workspace_outgrown_is_kept_and_grows_geometrically(monkeypatch):
    """The split-KV workspace: a call that needs more than the cached
    buffer gets one of at least twice its size, and the outgrown buffer
    stays alive (a CUDA graph captured with it writes into it at every
    replay; freed, its memory would go to other tensors). A batch growing
    one sequence at a time then allocates O(log n) buffers, and what is
    kept stays within the size of the current one."""
    from attn_mlir import vllm
    dev = torch.device("cpu")   # the logic alone; kernels never run here
    monkeypatch.setattr(vllm, "_WORKSPACES", {})
    monkeypatch.setattr(vllm, "_OUTGROWN", [])
    hq, segments, d = 32, 16, 128

    def shapes(tokens):
        return [(tokens, hq, segments, d), (tokens, hq, segments),
                (tokens, hq, segments)]
    partial, seg_max, seg_sum = vllm._workspace(dev, shapes(1))
    assert partial.shape == (1, hq, segments, d)
    assert seg_sum.shape == (1, hq, segments)
    # The three views lie one after another in the one buffer.
    assert seg_max.data_ptr() == partial.data_ptr() + 4 * partial.numel()
    assert seg_sum.data_ptr() == seg_max.data_ptr() + 4 * seg_max.numel()
    first = vllm._WORKSPACES[dev]
    made = [first]
    for tokens in range(2, 65):
        vllm._workspace(dev, shapes(tokens))
        if vllm._WORKSPACES[dev] is not made[-1]:
            made.append(vllm._WORKSPACES[dev])
    assert len(made) == 7               # for 1, 2, 4, ..., 64 tokens
    assert vllm._OUTGROWN == made[:-1]  # every outgrown buffer is kept
    assert sum(b.numel() for b in vllm._OUTGROWN) < made[-1].numel()
    # A smaller call takes the current buffer.
    assert vllm._workspace(dev, shapes(3))[0].data_ptr() == \
        made[-1].data_ptr()

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

from attn_mlir import _abi, _gpu, _replay, ops  # noqa: E402

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
    monkeypatch.setattr(_abi, "device_of", device_of)
    monkeypatch.setattr(_replay, "_on_gpu", lambda t: True)
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

    def launch_prepared(prepared, ptrs, dev, name):
        launches.append(("replay", [v for p in prepared
                                    for v in p.flat(ptrs)]))

    monkeypatch.setattr(ops._Call, "_run_gpu", run_gpu)
    monkeypatch.setattr(_gpu, "PreparedLaunch", Prepared)
    monkeypatch.setattr(ops, "_launch_prepared", launch_prepared)
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


def test_host_arrays_are_never_replayed():
    """numpy operands and CPU tensors: their contents are checked on every
    call, so their signatures are not memoized."""
    assert _replay._signature("unified", (np.zeros(3),), {}) is None
    assert _replay._signature("unified", (torch.zeros(3),), {}) is None
    assert _replay._signature("unified", (), {"x": {"a": 1}}) is None
    assert _replay._signature("unified", (1, 1.0, True), {}) != \
        _replay._signature("unified", (True, 1, 1.0), {})


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

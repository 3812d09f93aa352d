"""A mixed batch's two ops on two streams (_launch._in_lanes): which kernel goes
to the side stream, the order of the launches, the join after them (also
when a launch fails), and one stream where the runtime has no side stream.
The runtime's streams and the launches are stood in for; the GPU tests
(test_unified's mixed split, test_cuda_graphs' mixed cases) run the real
ones."""

import numpy as np
import pytest

from attn_mlir import _gpu, _launch, ops
from test_unified import make


class Kernel:
    def __init__(self, persistent=False):
        self.record = {"persistent": True} if persistent else {}


@pytest.fixture
def streams(monkeypatch):
    """Fake fork/join: the events they see, in order."""
    events = []

    def fork(stream, high=False, backend=0):
        events.append(("fork", stream, high))
        return "side"

    def join(stream, side, backend=0):
        events.append(("join", stream, side))

    monkeypatch.setattr(_gpu, "fork", fork)
    monkeypatch.setattr(_gpu, "join", join)
    return events


def test_side_kernel_after_the_others_then_join(streams):
    _launch._in_lanes(2, (0, True), "main", 0,
                  lambda i, s: streams.append(("launch", i, s)))
    assert streams == [("fork", "main", True), ("launch", 1, "main"),
                       ("launch", 0, "side"), ("join", "main", "side")]


def test_join_after_a_failed_launch(streams):
    def launch(i, s):
        streams.append(("launch", i, s))
        if s == "side":
            raise _gpu.GpuError("refused")
    with pytest.raises(_gpu.GpuError):
        _launch._in_lanes(2, (0, False), "main", 0, launch)
    assert streams[-1] == ("join", "main", "side")


def test_one_stream_without_side(streams, monkeypatch):
    got = []
    _launch._in_lanes(3, None, "main", 0, lambda i, s: got.append((i, s)))
    assert got == [(0, "main"), (1, "main"), (2, "main")] and not streams
    monkeypatch.setattr(_gpu, "fork", lambda *a, **k: None)
    _launch._in_lanes(2, (0, True), "main", 0, lambda i, s: got.append((i, s)))
    assert got[3:] == [(0, "main"), (1, "main")]


def test_side_lane_needs_one_kernel_a_variant_none_persistent():
    call = ops._Call("unified")
    assert _launch._side_lane(call, [Kernel(), Kernel()]) is None
    call.variants, call.side = [["a"], ["b"]], (0, True)
    assert _launch._side_lane(call, [Kernel(), Kernel()]) == (0, True)
    assert _launch._side_lane(call, [Kernel()] * 3) is None
    assert _launch._side_lane(call, [Kernel(), Kernel(persistent=True)]) is None


@pytest.mark.parametrize("fp8", [None, "f8E4M3FN"])
def test_mixed_batch_decode_op_on_the_side(fp8, monkeypatch):
    """ops.unified's mixed split puts its decode op (the first variant) on
    the side stream, at the greatest priority for the cache kinds
    MIXED_SIDE_HIGH names; an unsplit call has no side stream."""
    seen = []
    monkeypatch.setattr(ops._Call, "run", lambda self: seen.append(self))
    rng = np.random.default_rng(3)
    kind = "fp8" if fp8 else "16-bit"

    def call(q_lens):
        q, kc, vc, cu, su, table = make(
            rng, hq=8, hk=2, d=128, block_size=16, dtype="bf16", fp8=fp8,
            q_lens=q_lens, k_lens=[n + 30 for n in q_lens])
        scales = dict(k_descale=1.0, v_descale=1.0) if fp8 else {}
        ops.unified(q, kc, vc, table, cu, su, np.zeros_like(q), scale=0.1,
                    **scales)
        return seen[-1]
    monkeypatch.setattr(ops, "MIXED_SIDE_HIGH", ())
    split = call([1, 1, 70])
    assert "max_query_len" in " ".join(split.variants[0])
    assert split.side == (0, False)
    monkeypatch.setattr(ops, "MIXED_SIDE_HIGH", (kind,))
    assert call([1, 1, 70]).side == (0, True)
    whole = call([40])
    assert whole.side is None and whole.variants is None

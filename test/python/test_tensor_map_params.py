"""The launch ABI of TMA kernels without a GPU: tensor-map parameters
(manifest kind "tensor_map") are encoded from the operand they describe,
innermost dim first with byte strides, into 64-byte aligned 128-byte
parameter slots ahead of the operands' words, and cached per tensor."""
import ctypes

import pytest

from attn_mlir import _gpu
from attn_mlir._abi import View

RECORD = {
    "name": "kernel", "op": "attn.flash", "threads": 256, "shared_bytes": 0,
    "grid": [{"terms": [[0, 0, 128]], "add": 0}],
    "params": [
        {"arg": 1, "kind": "tensor_map", "operand": 1, "box": [128, 1, 64],
         "swizzle": 128, "dtype": "bf16"},
        {"arg": 0, "kind": "memref", "rank": 3, "dtype": "bf16"},
        {"arg": 1, "kind": "memref", "rank": 3, "dtype": "bf16"},
        {"arg": 2, "kind": "scalar", "dtype": "f32"},
    ],
}


class FakeRuntime:
    """attn_rt_encode_tensor_map and attn_rt_launch without a driver."""

    def __init__(self, rc=0):
        self.encoded, self.launched, self.rc = [], [], rc

    def attn_rt_encode_tensor_map(self, dtype, rank, base, dims, strides,
                                  box, out, err, n):
        if self.rc:
            err.value = b"cuTensorMapEncodeTiled failed with error 1"
            return self.rc
        self.encoded.append((dtype, rank, base.value, list(dims),
                             list(strides)[:rank - 1], list(box)))
        ctypes.memset(out.value, len(self.encoded), 128)
        return 0

    def attn_rt_launch(self, backend, fn, gx, gy, gz, threads, smem, stream,
                       slots, err, n):
        self.launched.append(slots[0])
        return 0


def view(name, ptr):
    return View(name, ptr, (300, 8, 128), (1024, 128, 1), "bf16", None)


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(_gpu, "_TENSOR_MAPS", {})
    rt = FakeRuntime()
    monkeypatch.setattr(_gpu, "runtime", lambda: rt)
    return rt


def test_tensor_map_is_encoded_from_its_operand(fake):
    kernel = _gpu.Kernel(RECORD, None, None, None)
    q, k = view("q", 0x10000), view("k", 0x20000)
    _gpu.launch(kernel, [k, q, k, 0.5], 0)
    # bf16 is CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 (9); dims and box innermost
    # first; byte strides of dims 1 and 2.
    assert fake.encoded == [(9, 3, 0x20000, [128, 8, 300], [256, 2048],
                             [64, 1, 128])]
    slot = kernel._map_slots[0]
    assert slot % 64 == 0
    assert ctypes.string_at(slot, 128) == bytes([1]) * 128
    # The map's slot comes first, then the operands' 8-byte words.
    assert kernel._slots[0] == slot
    assert fake.launched == [slot]   # what the driver is handed
    assert kernel._slots[1] == ctypes.addressof(kernel._words)
    assert list(kernel._words[:3]) == [0x10000, 0x10000, 0]


def test_tensor_map_is_cached_per_tensor(fake):
    kernel = _gpu.Kernel(RECORD, None, None, None)
    q, k = view("q", 0x10000), view("k", 0x20000)
    _gpu.launch(kernel, [k, q, k, 0.5], 0)
    ctypes.memset(kernel._map_slots[0], 0, 128)
    _gpu.launch(kernel, [k, q, k, 0.5], 0)
    assert len(fake.encoded) == 1   # copied from the cache, not re-encoded
    assert ctypes.string_at(kernel._map_slots[0], 128) == bytes([1]) * 128
    other = view("k", 0x30000)
    _gpu.launch(kernel, [other, q, other, 0.5], 0)
    assert len(fake.encoded) == 2


def test_tensor_map_errors_name_the_operand(fake):
    kernel = _gpu.Kernel(RECORD, None, None, None)
    q = view("q", 0x10000)
    k = View("k", 0x20000, (300, 8, 128), (1024, 1, 8), "bf16", None)
    with pytest.raises(_gpu.GpuError, match="k: a TMA kernel needs its "
                                            "innermost dim contiguous"):
        _gpu.launch(kernel, [k, q, k, 0.5], 0)
    fake.rc = 7
    with pytest.raises(_gpu.GpuError, match=r"k: cuTensorMapEncodeTiled "
                                            r"failed .*shape \(300, 8, 128\)"):
        _gpu.launch(kernel, [view("k", 0x40000), q, view("k", 0x40000), 0.5],
                    0)


def test_prepared_launch_has_its_own_maps_and_words(fake):
    """attn_mlir._replay's prepared launch of a TMA kernel: its own 64-byte
    aligned map slot and parameter words (the kernel's stay as they were),
    the map encoded from the call's pointer, the operands' pointers patched
    in, and the grid of the first call."""
    kernel = _gpu.Kernel(RECORD, None, None, None)
    q, k = view("q", 0x10000), view("k", 0x20000)
    prepared = _gpu.PreparedLaunch(kernel, [k, q, k, 0.5], [1, 0, 1, None])
    _gpu.launch_prepared([prepared], [0x50000, 0x60000], 0)
    slot = prepared._slots[0]
    assert slot % 64 == 0 and slot != kernel._map_slots[0]
    assert fake.encoded[0][2] == 0x60000   # k's map, at the call's k
    assert fake.launched == [slot]
    assert prepared._dims == (2, 1, 1, 256, 0)   # 300 // 128 programs
    assert prepared._slots[1] == ctypes.addressof(prepared._words)
    words = list(prepared._words)
    assert words[:3] == [0x50000, 0x50000, 0]     # q
    assert words[9:12] == [0x60000, 0x60000, 0]   # k
    assert list(kernel._words[:3]) == [0, 0, 0]


def test_small_grids_launch_with_the_spread_footprint(monkeypatch):
    """A kernel whose manifest names a small-grid footprint (sm_90a's fp8
    decode programs: three an SM at 66,816 bytes, two at 84,224) asks for
    the larger one on grids of fewer programs than programs_per_sm x SMs,
    eagerly and in a prepared (replayed) launch, and for its own on larger
    grids; a kernel without the rule always asks for its own."""
    launched = []

    class Runtime(FakeRuntime):
        def attn_rt_launch(self, backend, fn, gx, gy, gz, threads, smem,
                           stream, slots, err, n):
            launched.append((gx * gy * gz, smem))
            return 0
    monkeypatch.setattr(_gpu, "runtime", lambda: Runtime())
    record = {"name": "decode", "op": "attn.unified", "threads": 128,
              "shared_bytes": 66816,
              "small_grid": {"programs_per_sm": 4, "shared_bytes": 84224},
              "grid": [{"terms": [[0, 0, 1]], "add": 0},
                       {"terms": [], "add": 8}],
              "params": [{"arg": 0, "kind": "memref", "rank": 1,
                          "dtype": "i32"}]}
    kernel = _gpu.Kernel(record, None, None, None, None, multiprocessors=132)

    def seqs(n):
        return View("cu", 0x1000, (n,), (1,), "i32", None)
    _gpu.launch(kernel, [seqs(64)], 0)      # 512 programs < 4 x 132
    _gpu.launch(kernel, [seqs(256)], 0)     # 2048 programs
    _gpu.launch(kernel, [seqs(66)], 0)      # 528: from 4 x 132 up, compact
    assert launched == [(512, 84224), (2048, 66816), (528, 66816)]
    prepared = _gpu.PreparedLaunch(kernel, [seqs(64)], [0])
    assert prepared._dims == (64, 8, 1, 128, 84224)
    plain = _gpu.Kernel({**record, "small_grid": None}, None, None, None)
    assert plain.shared_bytes((64, 8, 1)) == 66816
    unknown_sms = _gpu.Kernel(record, None, None, None)
    assert unknown_sms.shared_bytes((64, 8, 1)) == 66816


def test_small_grid_footprint_by_waves():
    """Where the driver reports both footprints' blocks an SM (three at
    66,816 bytes, two at 84,224 on 132 SMs), the small-grid footprint is
    taken exactly where it needs no more waves of the programs that have
    work: 320 programs are one wave at three an SM but two at two, 264 one
    wave either way, 576 two at three but three at two. The grid of a
    decode batch (query tiles of the tokens plus the sequences: B + B / 4
    tiles) counts its B busy programs. Without occupancy or shapes, the
    manifest's programs_per_sm decides (the test above)."""
    record = {"name": "decode", "op": "attn.unified", "threads": 128,
              "shared_bytes": 66816,
              "small_grid": {"programs_per_sm": 4, "shared_bytes": 84224},
              "grid": [{"terms": [[0, 0, 4], [1, 0, 1]], "add": -1},
                       {"terms": [], "add": 8}],
              "params": [{"arg": 0, "kind": "memref", "rank": 3,
                          "dtype": "bf16"},
                         {"arg": 1, "kind": "memref", "rank": 1,
                          "dtype": "i32"}]}
    kernel = _gpu.Kernel(record, None, None, None, None, multiprocessors=132,
                         occupancy=(3, 2))

    def footprint(sequences):
        shapes = [(sequences, 32, 128), (sequences + 1,)]
        grid = kernel.grid(shapes)
        assert grid[0] == sequences + sequences // 4
        return kernel.shared_bytes(grid, shapes)
    # (Programs: 8 a sequence, one a KV head.)
    got = {b: footprint(b) for b in (1, 33, 34, 40, 49, 50, 64, 66, 67, 72,
                                     256)}
    assert got == {1: 84224, 33: 84224, 34: 66816, 40: 66816, 49: 66816,
                   50: 84224, 64: 84224, 66: 84224, 67: 66816, 72: 66816,
                   256: 66816}
    # Without shapes (or occupancy): programs_per_sm x SMs.
    assert kernel.shared_bytes((50, 8, 1)) == 84224
    unknown = _gpu.Kernel(record, None, None, None, None, multiprocessors=132,
                          occupancy=(3, 0))
    shapes = [(40, 32, 128), (41,)]
    assert unknown.shared_bytes(unknown.grid(shapes), shapes) == 84224
    prepared = _gpu.PreparedLaunch(kernel, [
        View("q", 0x1000, (40, 32, 128), (4096, 128, 1), "bf16", None),
        View("cu", 0x2000, (41,), (1,), "i32", None)], [0, 1])
    assert prepared._dims[-1] == 66816

"""attn_mlir.distributed: context-parallel attention over torch.distributed.

Three layers, cheapest first:
* the causal shard planner against the absolute-position mask, for every
  small (queries, keys, shard) combination (numpy only);
* shards computed on one process (FlashPlan.partial) and merged by
  merge_states, for several shard layouts (real kernels, no processes);
* 2 and 3 CPU processes with the gloo backend running context_parallel_flash
  / context_parallel_decode, each rank's result checked against the
  one-process ops.flash result and a float64 reference.
"""

import datetime
import os
import tempfile

import numpy as np
import pytest

from reference import DTYPES, TOL, attend, f64
from test_lse import flash_case

torch = pytest.importorskip("torch", reason="attn_mlir.distributed needs torch")
if not torch.distributed.is_available() or \
        not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with the gloo backend is not available",
                allow_module_level=True)
if os.environ.get("ATTN_MLIR_TEST_DEVICE") == "cuda":
    pytest.skip("runs its own CPU processes; the conftest's GPU redirection "
                "copies numpy operands only", allow_module_level=True)

from attn_mlir import distributed as cp  # noqa: E402
from attn_mlir import ops  # noqa: E402

# Merging shards reorders f32 sums: a few ulps of the one-pass result.
MERGE_RTOL = 1e-5
HQ, HK, D = 4, 2, 16
SCALE = D ** -0.5


# ---------------------------------------------------------------------------
# The planner, against the mask of absolute positions
# ---------------------------------------------------------------------------

def planned_visibility(calls, cq, ck):
    """How many times the calls' flash masks make (row, shard key) visible."""
    count = np.zeros((cq[-1], ck[-1]), np.int64)
    for cu_q, cu_k, causal in calls:
        assert cu_q[-1] == cq[-1] and cu_k[-1] == ck[-1]
        for s in range(len(cu_q) - 1):
            lq, lk = cu_q[s + 1] - cu_q[s], cu_k[s + 1] - cu_k[s]
            i, j = np.arange(lq)[:, None], np.arange(lk)[None, :]
            vis = (j <= i + lk - lq) if causal else np.ones((lq, lk), bool)
            count[cu_q[s]:cu_q[s + 1], cu_k[s]:cu_k[s + 1]] += vis
    return count


def true_visibility(cq, ck, kv_start, seqlens_k):
    """Query i of sequence b (position Lk - Lq + i) sees shard key j
    (position kv_start + j) iff kv_start + j <= Lk - Lq + i."""
    truth = np.zeros((cq[-1], ck[-1]), np.int64)
    for b in range(len(cq) - 1):
        lq, n = cq[b + 1] - cq[b], ck[b + 1] - ck[b]
        i, j = np.arange(lq)[:, None], np.arange(n)[None, :]
        truth[cq[b]:cq[b + 1], ck[b]:ck[b + 1]] = \
            kv_start[b] + j <= seqlens_k[b] - lq + i
    return truth


def all_shapes(max_keys=6):
    """(Lq, Lk, k0, n) for every shard [k0, k0 + n) of every small case,
    Lq > Lk included."""
    for lk in range(max_keys + 1):
        for lq in range(lk + 3):
            for k0 in range(lk + 1):
                for n in range(lk - k0 + 1):
                    yield lq, lk, k0, n


def test_planner_matches_absolute_positions_exhaustively():
    shapes = list(all_shapes())
    # One sequence at a time (each call's structure alone), then all of them
    # in one batch (the offsets of many sequences together).
    batches = [[s] for s in shapes] + [shapes]
    kinds = set()
    for batch in batches:
        lq, lk, k0, n = (np.array(x) for x in zip(*batch))
        cq = np.concatenate([[0], np.cumsum(lq)])
        ck = np.concatenate([[0], np.cumsum(n)])
        calls = cp.shard_calls(cq, ck, k0, lk)
        got = planned_visibility(calls, cq, ck)
        want = true_visibility(cq, ck, k0, lk)
        assert np.array_equal(got, want), f"shard (Lq, Lk, k0, n) {batch}"
        kinds.add(tuple(c for _, _, c in calls))
    # Both call kinds occur, alone and together.
    assert kinds == {(True,), (False,), (True, False)}


def test_planner_uses_one_plain_call_where_flash_suffices():
    # The last shard of a sequence is flash's own bottom-right causal case:
    # one call, the original offsets.
    cq, ck = np.array([0, 3, 8]), np.array([0, 4, 6])
    calls = cp.shard_calls(cq, ck, kv_start=[6, 1], seqlens_k=[10, 3])
    assert len(calls) == 1 and calls[0][2]
    assert calls[0][0][::3].tolist() == cq.tolist()
    assert calls[0][1][::3].tolist() == ck.tolist()
    # A shard before every query's position: one non-causal call.
    calls = cp.shard_calls(cq, ck, kv_start=[0, 0], seqlens_k=[10, 9])
    assert [c for _, _, c in calls] == [False]


# ---------------------------------------------------------------------------
# Shards on one process
# ---------------------------------------------------------------------------

def varlen(rng, q_lens, k_lens, dtype="f32", hq=HQ, hk=HK, d=D):
    return flash_case(rng, q_lens, k_lens, hq, hk, d, dtype)


def reference(q, k, v, cq, ck, causal, sinks=None):
    """float64 attention over absolute positions (docs/semantics.md 2, 3.3),
    and the row log-sum-exps."""
    out = np.zeros(q.shape)
    lse = np.zeros(q.shape[:2])
    g = q.shape[1] // k.shape[1]
    for b in range(len(cq) - 1):
        lq, lk = cq[b + 1] - cq[b], ck[b + 1] - ck[b]
        i, j = np.arange(lq)[:, None], np.arange(lk)[None, :]
        vis = (j <= lk - lq + i) if causal else np.ones((lq, lk), bool)
        for h in range(q.shape[1]):
            qs = f64(q[cq[b]:cq[b + 1], h])
            ks = f64(k[ck[b]:ck[b + 1], h // g])
            vs = f64(v[ck[b]:ck[b + 1], h // g])
            sink = None if sinks is None else float(sinks[h])
            out[cq[b]:cq[b + 1], h] = attend(qs, ks, vs, SCALE, vis, sink=sink)
            s = np.where(vis, SCALE * qs @ ks.T, -np.inf)
            if sink is not None:
                s = np.concatenate([s, np.full((lq, 1), sink)], axis=1)
            with np.errstate(divide="ignore"):
                m = s.max(axis=1) if s.shape[1] else np.full(lq, -np.inf)
                safe = np.where(np.isfinite(m), m, 0.0)
                lse[cq[b]:cq[b + 1], h] = safe + np.log(
                    np.exp(s - safe[:, None]).sum(axis=1))
    return out, lse


def one_process(q, k, v, cq, ck, causal):
    out = np.full(q.shape, np.nan, q.dtype)
    lse = np.full(q.shape[:2], np.nan, np.float32)
    ops.flash(q, k, v, cq, ck, out, scale=SCALE, causal=causal, lse=lse)
    return out, lse


def check_lse(lse, ref, tol=2e-5):
    empty = np.isneginf(ref)
    assert np.isneginf(lse[empty]).all(), "rows without a key must give -inf"
    np.testing.assert_allclose(lse[~empty], ref[~empty], rtol=tol, atol=tol)


def check_merge(parts, lses, q, k, v, cq, ck, causal):
    """Shards' partials merged by merge_states against one-process flash
    (1e-5) and float64, the merged lse against the whole sequence's, and
    one-process flash's lse too; returns the one-process output."""
    merged = np.full(q.shape, np.nan, np.float32)
    ops.merge_states(torch.stack(parts, dim=2), merged,
                     segment_lse=torch.stack(lses, dim=2))
    full, full_lse = one_process(q, k, v, cq, ck, causal)
    np.testing.assert_allclose(merged, full, rtol=MERGE_RTOL, atol=MERGE_RTOL)
    ref, ref_lse = reference(q, k, v, cq, ck, causal)
    np.testing.assert_allclose(merged, ref, rtol=TOL["f32"], atol=TOL["f32"])
    check_lse(torch.logsumexp(torch.stack(lses), dim=0).numpy(), ref_lse)
    check_lse(full_lse, ref_lse)
    return full


# Sequence 3 has more queries than keys (its first causal rows see nothing);
# sequence 1 is a decode row.
Q_LENS, K_LENS = [6, 1, 9, 5], [11, 8, 9, 3]


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("weights", [[1, 1], [1, 2, 1], [0, 1], [2, 0, 3],
                                     [1, 1, 1, 1, 1, 1, 1]],
                         ids=lambda w: "-".join(map(str, w)))
def test_shards_merge_on_one_process(causal, weights):
    rng = np.random.default_rng(1)
    q, k, v, cq, ck = varlen(rng, Q_LENS, K_LENS)
    parts, lses = [], []
    for rank in range(len(weights)):
        rows, ck_s, start, lens = cp.split_keys(ck, len(weights), rank,
                                                weights)
        plan = cp.FlashPlan(cq, ck_s, causal=causal, kv_start=start,
                            seqlens_k=lens)
        part, lse = plan.partial(q, np.ascontiguousarray(k[rows]),
                                 np.ascontiguousarray(v[rows]), scale=SCALE)
        parts.append(part)
        lses.append(lse)
    full = check_merge(parts, lses, q, k, v, cq, ck, causal)
    # A shard alone is not the answer (the comparison can fail).
    if weights[0]:
        assert not np.allclose(parts[0].numpy(), full, atol=1e-3)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("world", [1, 2, 3])
def test_zigzag_pieces_merge_on_one_process(causal, world):
    """Zigzag shards: two key ranges of each sequence per rank, planned as
    pieces; every rank's pieces and every rank merged in one merge_states."""
    rng = np.random.default_rng(4)
    q, k, v, cq, ck = varlen(rng, Q_LENS, K_LENS)
    parts, lses, rows_seen = [], [], []
    for rank in range(world):
        rows, ck_s, start, lens = cp.split_keys(ck, world, rank, zigzag=True)
        assert ck_s.shape == (2, len(cq)) and start.shape == (2, len(cq) - 1)
        rows_seen.append(rows)
        plan = cp.FlashPlan(cq, ck_s, causal=causal, kv_start=start,
                            seqlens_k=lens)
        part, lse = plan.partial(q, np.ascontiguousarray(k[rows]),
                                 np.ascontiguousarray(v[rows]), scale=SCALE)
        assert part.shape == (2,) + q.shape and lse.shape == (2,) + q.shape[:2]
        parts += list(part)
        lses += list(lse)
    assert sorted(np.concatenate(rows_seen).tolist()) == list(range(ck[-1]))
    check_merge(parts, lses, q, k, v, cq, ck, causal)


def test_zigzag_balances_causal_work():
    """Every rank's zigzag chunks see the same number of (query, key)
    pairs of a causal prefill (the reason for the layout); rank-order
    shards do not."""
    n, world = 64, 2
    ck = np.array([0, n])

    def pairs(start, size):   # queries at 0..n-1 see keys <= their position
        keys = np.arange(start, start + size)
        return int(sum(n - kk for kk in keys))
    zig = [sum(pairs(s, b - a) for s, a, b in
               zip(got[2][:, 0], got[1][:, 0], got[1][:, 1]))
           for got in (cp.split_keys(ck, world, r, zigzag=True)
                       for r in range(world))]
    order = [pairs(got[2][0], got[1][1]) for got in
             (cp.split_keys(ck, world, r) for r in range(world))]
    assert zig[0] == zig[1] and sum(zig) == n * (n + 1) // 2
    assert order[0] > 2.5 * order[1]   # about 3x (the diagonal aside)


def test_bad_pieces_are_named():
    q, k, v, cq, ck = plan_args()
    with pytest.raises(ValueError, match=r"piece 1's offsets must be non-"
                                         r"decreasing and start where piece "
                                         r"0's end \(9\)"):
        cp.FlashPlan(cq, np.stack([ck, ck]), causal=False)
    with pytest.raises(ValueError, match=r"piece 0's offsets must be non-"
                                         r"decreasing and start at 0"):
        cp.FlashPlan(cq, np.stack([ck + 1, ck + 10]), causal=False)
    pieces = np.stack([ck, ck + 9])
    with pytest.raises(ValueError, match=r"kv_start: a causal plan over "
                                         r"several pieces"):
        cp.FlashPlan(cq, pieces, causal=True)
    with pytest.raises(ValueError, match=r"kv_start: expected shape \(2, 2\)"):
        cp.FlashPlan(cq, pieces, causal=True, kv_start=[[0, 0]],
                     seqlens_k=[8, 10])
    with pytest.raises(ValueError, match=r"kv_start: expected a 2-D integer"):
        cp.FlashPlan(cq, pieces, causal=True, kv_start=[0, 0],
                     seqlens_k=[8, 10])
    with pytest.raises(ValueError, match=r"kv_start\[1\]: sequence 0's shard "
                                         r"\[5, 9\) is not within"):
        cp.FlashPlan(cq, pieces, causal=True, kv_start=[[0, 0], [5, 5]],
                     seqlens_k=[8, 10])
    with pytest.raises(ValueError, match="weights: zigzag chunks are equal"):
        cp.split_keys(ck, 2, 0, [1, 1], zigzag=True)


def test_rows_before_a_shard_are_empty():
    """A causal shard past a query's position: that row sees nothing of it
    (0, lse -inf), whatever its keys hold."""
    rng = np.random.default_rng(2)
    q, k, v, cq, ck = varlen(rng, [4], [8])
    # Keys [5, 8) of 8: queries at positions 4..7; the first sees none.
    plan = cp.FlashPlan(cq, np.array([0, 3]), causal=True, kv_start=[5],
                        seqlens_k=[8])
    part, lse = (t.numpy() for t in plan.partial(q, k[5:], v[5:],
                                                 scale=SCALE))
    assert np.isneginf(lse[0]).all() and (part[0] == 0).all()
    assert np.isfinite(lse[1:]).all()
    # Row 1 (position 5) sees key 5 alone: its output is that key's value.
    np.testing.assert_allclose(part[1, 0], v[5, 0], rtol=1e-6)


# ---------------------------------------------------------------------------
# Argument checks
# ---------------------------------------------------------------------------

def plan_args():
    rng = np.random.default_rng(3)
    return varlen(rng, [3, 2], [4, 5])


@pytest.mark.parametrize("kwargs,match", [
    (dict(kv_start=[0, 0, 0], seqlens_k=[4, 5]),
     r"kv_start: expected 2 values \(one per sequence\), got 3"),
    (dict(kv_start=[0, 0], seqlens_k=[4]),
     r"seqlens_k: expected 2 values"),
    (dict(kv_start=[1, 0], seqlens_k=[4, 5]),
     r"kv_start: sequence 0's shard \[1, 5\) is not within its "
     r"seqlens_k = 4"),
    (dict(kv_start=[0, -1], seqlens_k=[4, 5]), r"kv_start: sequence 1's"),
    (dict(kv_start=[0, 0]), r"seqlens_k: give kv_start and seqlens_k"),
])
def test_bad_positions_are_named(kwargs, match):
    q, k, v, cq, ck = plan_args()
    with pytest.raises(ValueError, match=match):
        cp.FlashPlan(cq, ck, causal=True, **kwargs)


def test_bad_offsets_are_named():
    q, k, v, cq, ck = plan_args()
    with pytest.raises(ValueError, match=r"cu_seqlens_k_shard: 1 sequences, "
                                         r"but cu_seqlens_q has 2"):
        cp.FlashPlan(cq, ck[:2], causal=True, kv_start=[0], seqlens_k=[4])
    with pytest.raises(ValueError, match="cu_seqlens_q: expected non-"):
        cp.FlashPlan([0, 3, 1], ck, causal=False)
    with pytest.raises(ValueError, match="cu_seqlens_k_shard: expected a 1-D"):
        cp.FlashPlan(cq, ck.astype(np.float32), causal=False)


@pytest.mark.parametrize("change,match", [
    (lambda q, k, v: (q, k, v[:, :1]),
     r"v_shard: expected the shape of k_shard \(9, 2, 16\), got \(9, 1, 16\)"),
    (lambda q, k, v: (q, k.astype(DTYPES["bf16"]), v),
     "k_shard: expected q's dtype f32, got bf16"),
    (lambda q, k, v: (q.astype(DTYPES["f8E4M3FN"]), k, v),
     "q: expected one of f32, f16, bf16, got f8E4M3FN"),
    (lambda q, k, v: (q[:, :3], k, v), "k_shard: 2 KV heads do not divide"),
    (lambda q, k, v: (q, k[:4], v[:4]),
     "k_shard: the offsets address 9 rows, it has 4"),
    (lambda q, k, v: (q[:, :, :8], k, v), "k_shard: head dim 16 differs"),
])
def test_bad_shards_are_named(change, match):
    q, k, v, cq, ck = plan_args()
    plan = cp.FlashPlan(cq, ck, causal=True, kv_start=[0, 0],
                        seqlens_k=[4, 5])
    q, k, v = change(q, k, v)
    with pytest.raises(ValueError, match=match):
        plan.partial(np.ascontiguousarray(q), np.ascontiguousarray(k),
                     np.ascontiguousarray(v), scale=SCALE)


def test_plan_of_another_device_is_named():
    q, k, v, cq, ck = plan_args()
    plan = cp.FlashPlan(cq, ck, causal=False, device="meta")
    with pytest.raises(ValueError, match="q: on cpu, but the plan was built "
                                         "for meta"):
        plan.partial(q, k, v, scale=SCALE)


def test_decode_takes_float_queries():
    q = np.zeros((2, HQ, D), DTYPES["f8E4M3FN"])
    with pytest.raises(ValueError, match="q: expected one of f32, f16, bf16"):
        cp.context_parallel_decode(q, None, None, None, None, None, scale=1.0)


@pytest.mark.parametrize("n", [1, 0, 2.0, "4"])
def test_decode_names_bad_segment_counts(n):
    q = torch.zeros((2, HQ, D))
    with pytest.raises(ValueError, match="num_segments: expected an int >= 2"):
        cp.context_parallel_decode(q, None, None, None, None, None, scale=1.0,
                                   num_segments=n)


@pytest.mark.parametrize("args,match", [
    ((3, 0, [1, 1]), r"weights: expected world_size = 3 values \(one per "
                     r"rank\), got 2"),
    ((2, 2, None), r"rank: must be in \[0, 2\), got 2"),
    ((2, 0, [0, 0]), "weights: expected non-negative values, not all 0"),
    ((0, 0, None), "world_size: must be >= 1"),
])
def test_split_keys_checks(args, match):
    with pytest.raises(ValueError, match=match):
        cp.split_keys([0, 4, 9], *args)


def test_split_keys_partitions_each_sequence():
    ck = np.array([0, 4, 9, 9])
    got = [cp.split_keys(ck, 3, r, [2, 0, 1]) for r in range(3)]
    rows = np.concatenate([g[0] for g in got])
    assert sorted(rows.tolist()) == list(range(9))
    assert got[1][1].tolist() == [0, 0, 0, 0]          # the empty shard
    assert got[2][2].tolist() == [2, 3, 0]             # kv_start of rank 2
    assert got[0][3].tolist() == [4, 5, 0]


def test_merge_partials_checks():
    part = torch.zeros((3, 4, 16))
    with pytest.raises(ValueError, match="partial: expected a torch tensor"):
        cp.merge_partials(part.numpy(), torch.zeros((3, 4)), part)
    with pytest.raises(ValueError,
                       match=r"partial_lse: expected float32 \[3, 4\]"):
        cp.merge_partials(part, torch.zeros((3, 5)), part)
    with pytest.raises(ValueError, match=r"out: expected shape \(3, 4, 16\)"):
        cp.merge_partials(part, torch.zeros((3, 4)), torch.zeros((2, 4, 16)))
    with pytest.raises(ValueError, match="group: torch.distributed is not "
                                         "initialized"):
        cp.merge_partials(part, torch.zeros((3, 4)), torch.zeros((3, 4, 16)))


# ---------------------------------------------------------------------------
# Processes with gloo
# ---------------------------------------------------------------------------

def case_inputs(name, world):
    """The batch of one case, the same in the parent and every rank."""
    rng = np.random.default_rng([CASES.index(name), world])
    dtype = "bf16" if name == "bf16" else "f32"
    decoding = name in ("decode", "paged_decode", "paged_decode_split")
    q_lens = [1, 1, 1] if decoding else Q_LENS
    k_lens = [13, 1, 6] if decoding else K_LENS
    q, k, v, cq, ck = varlen(rng, q_lens, k_lens, dtype)
    sinks = rng.standard_normal(HQ).astype(np.float32) \
        if name == "sinks_lse" else None
    causal = name != "full"
    # Uneven shards: the middle rank (or the last, of two) holds nothing.
    weights = None
    if name in ("uneven", "full", "sinks_lse"):
        weights = [2, 0, 1][:world] if world > 2 else [1, 0]
    return dict(q=q, k=k, v=v, cq=cq, ck=ck, sinks=sinks, causal=causal,
                weights=weights, dtype=dtype)


CASES = ["causal", "uneven", "full", "decode", "sinks_lse", "bf16",
         "paged_decode", "zigzag", "paged_decode_split"]


def run_case(name, world, rank):
    c = case_inputs(name, world)
    q = torch.from_numpy(c["q"]) if c["dtype"] == "f32" else \
        torch.from_numpy(c["q"].view(np.int16)).view(torch.bfloat16)
    out = torch.full(q.shape, float("nan"), dtype=q.dtype)
    lse = torch.full(q.shape[:2], float("nan"))
    if name in ("paged_decode", "paged_decode_split"):
        # (Split: three segments a rank's walk, most of them empty or of
        # one page, and the lse from their maxima and sums.)
        return run_paged_decode(c, world, rank, q, out, lse,
                                3 if name == "paged_decode_split" else None)
    zigzag = name == "zigzag"
    rows, ck_s, start, lens = cp.split_keys(c["ck"], world, rank,
                                            c["weights"], zigzag=zigzag)
    k = np.ascontiguousarray(c["k"][rows])
    v = np.ascontiguousarray(c["v"][rows])
    # Explicit positions for uneven and zigzag shards; rank order (a gather
    # of the shard lengths) otherwise.
    positions = dict(kv_start=start, seqlens_k=lens) \
        if c["weights"] is not None or zigzag else {}
    sinks = None if c["sinks"] is None else torch.from_numpy(c["sinks"])
    cp.context_parallel_flash(q, k, v, c["cq"], ck_s, out, scale=SCALE,
                              causal=c["causal"], sinks=sinks, lse=lse,
                              **positions)
    return out, lse


PAGE = 4


def run_paged_decode(c, world, rank, q, out, lse, num_segments=None):
    """Rank r holds pages p % world == r of sequence 0, all of sequence 1 is
    on rank 0, sequence 2 is cut in rank order: the shards of a paged decode
    need no positions."""
    ck, k, v = c["ck"], c["k"], c["v"]
    mine = []
    for b in range(len(ck) - 1):
        keys = np.arange(ck[b], ck[b + 1])
        if b == 0:
            keys = keys[(np.arange(keys.size) // PAGE) % world == rank]
        elif b == 1:
            keys = keys if rank == 0 else keys[:0]
        else:
            keys = np.array_split(keys, world)[rank]
        mine.append(keys)
    pages = [-(-x.size // PAGE) for x in mine]
    kc = np.zeros((sum(pages) + 1, PAGE, HK, D), np.float32)
    vc = np.zeros_like(kc)
    table = np.zeros((len(mine), max(pages + [1])), np.int32)
    nxt = 1   # block 0 is never used: a wrong table read shows
    kc[0] = vc[0] = np.nan
    for b, keys in enumerate(mine):
        for p in range(pages[b]):
            chunk = keys[p * PAGE:(p + 1) * PAGE]
            kc[nxt, :chunk.size], vc[nxt, :chunk.size] = k[chunk], v[chunk]
            table[b, p] = nxt
            nxt += 1
    seqused = np.array([x.size for x in mine], np.int32)
    sinks = None
    # A first call on other queries: the checked call reuses its buffers
    # (packed partial and lse, segments, merge counters).
    cp.context_parallel_decode(-2 * q, torch.from_numpy(kc),
                               torch.from_numpy(vc), torch.from_numpy(table),
                               torch.from_numpy(seqused), torch.empty_like(out),
                               scale=SCALE, num_segments=num_segments)
    cp.context_parallel_decode(q, torch.from_numpy(kc), torch.from_numpy(vc),
                               torch.from_numpy(table),
                               torch.from_numpy(seqused), out, scale=SCALE,
                               sinks=sinks, lse=lse, num_segments=num_segments)
    return out, lse


def run_errors(world, rank, results):
    """Mismatched batches across ranks raise the same ValueError on every
    rank (so no rank is left waiting in a collective)."""
    cq, ck = np.array([0, 3, 5]), np.array([0, 2, 4])
    bad = {"batch": cq[:2] if rank == 1 else cq,
           "lengths": np.array([0, 3, 5 + (rank == 1)])}
    for name, my_cq in bad.items():
        try:
            cp.FlashPlan(my_cq, ck[:my_cq.size], causal=True)
        except ValueError as e:
            results[f"error_{name}"] = np.array(str(e))


def worker(rank, world, init, outdir):
    torch.set_num_threads(1)
    torch.distributed.init_process_group(
        "gloo", init_method=init, rank=rank, world_size=world,
        timeout=datetime.timedelta(seconds=30))
    results = {}
    try:
        run_errors(world, rank, results)
        for name in CASES:
            out, lse = run_case(name, world, rank)
            results[f"{name}/out"] = out.float().numpy()
            results[f"{name}/lse"] = lse.numpy()
    finally:
        np.savez(os.path.join(outdir, f"rank{rank}.npz"), **results)
        torch.distributed.destroy_process_group()


@pytest.fixture(scope="module", params=[2, 3], ids=lambda w: f"world{w}")
def ranks(request):
    world = request.param
    with tempfile.TemporaryDirectory() as d:
        torch.multiprocessing.spawn(
            worker, args=(world, f"file://{d}/init", d), nprocs=world)
        yield world, [dict(np.load(os.path.join(d, f"rank{r}.npz")))
                      for r in range(world)]


@pytest.mark.parametrize("name", CASES)
def test_processes_merge_to_the_one_process_result(ranks, name):
    world, results = ranks
    c = case_inputs(name, world)
    q, k, v, cq, ck = c["q"], c["k"], c["v"], c["cq"], c["ck"]
    ref, ref_lse = reference(q, k, v, cq, ck, c["causal"], c["sinks"])
    out = results[0][f"{name}/out"]
    for r in range(1, world):   # the same merge of the same data
        assert np.array_equal(results[r][f"{name}/out"], out, equal_nan=True)
        assert np.array_equal(results[r][f"{name}/lse"],
                              results[0][f"{name}/lse"])
    tol = TOL[c["dtype"]]
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)
    check_lse(results[0][f"{name}/lse"], ref_lse)
    if c["sinks"] is None and c["dtype"] == "f32":
        full, full_lse = one_process(q, k, v, cq, ck, c["causal"])
        np.testing.assert_allclose(out, full, rtol=MERGE_RTOL,
                                   atol=MERGE_RTOL)
    if c["sinks"] is not None:
        # Applied once: the same batch without sinks differs.
        plain, _ = reference(q, k, v, cq, ck, c["causal"])
        assert not np.allclose(out, plain, atol=1e-3)


def test_processes_name_mismatched_batches(ranks):
    world, results = ranks
    for r in range(world):
        assert "ranks disagree on the batch size" in \
            str(results[r]["error_batch"])
        assert "cu_seqlens_q: rank 1 has [0, 3, 6]" in \
            str(results[r]["error_lengths"])

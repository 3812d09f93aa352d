"""How the program shape moves paged decode: ops.unified, GQA 32/8 D=128,
pages of 16, under the plan's schedule and pinned ones. Issue 20's rows:
B=64 ctx=4096 over e4m3 caches with per-tensor descales (the default),
bf16 caches (PROBE_CACHE=bf16), and query tokens per sequence
(PROBE_QTOKENS=4: speculative decode, causal). PROBE_B, PROBE_CTX: the
batch; PROBE_HQ, PROBE_HK: the heads; PROBE_SEGMENTS=S: the split-KV form
with S segments (the count read at run time) and attn.merge_states;
PROBE_SCHEDULES: ';'-separated schedules, 'plan' for the plan's (default:
the plan and warps splitting 64-key tiles). Prints GB/s counted at the
cache's width per schedule, and the plan's error against a float64
reference on 4 sequences. ATTN_MLIR_DRY_RUN=1 only records the
specializations.
"""
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from attn_mlir import ops  # noqa: E402

env = os.environ.get
D, BS = 128, 16
HQ, HK = int(env("PROBE_HQ", 32)), int(env("PROBE_HK", 8))
B, CTX = int(env("PROBE_B", 64)), int(env("PROBE_CTX", 4096))
QT = int(env("PROBE_QTOKENS", 1))
SEG = int(env("PROBE_SEGMENTS", 0))
FP8 = env("PROBE_CACHE", "fp8") == "fp8"
SCHEDULES = [None if s.strip() == "plan" else
             tuple(int(x) for x in s.split(","))
             for s in env("PROBE_SCHEDULES", "plan;4,64,4,4").split(";")]
nblk = CTX // BS
nb = B * nblk
table = np.random.default_rng(3).permutation(nb).reshape(B, nblk).astype(
    np.int32)
cu = np.arange(B + 1, dtype=np.int32) * QT
su = np.full(B, CTX, np.int32)
scale = D ** -0.5
causal = QT > 1
if env("ATTN_MLIR_DRY_RUN"):
    import ml_dtypes
    q = np.empty((B * QT, HQ, D), ml_dtypes.bfloat16)
    kc = np.empty((nb, BS, HK, D),
                  ml_dtypes.float8_e4m3fn if FP8 else ml_dtypes.bfloat16)
    extra = dict(k_descale=np.ones(1, np.float32),
                 v_descale=np.ones(1, np.float32)) if FP8 else {}
    for s in SCHEDULES:
        if SEG:
            part = np.empty(q.shape[:2] + (SEG, D), np.float32)
            mx = np.empty(q.shape[:2] + (SEG,), np.float32)
            ops.unified(q, kc, kc, table, cu, su, part, scale=scale,
                        causal=causal, schedule=s, segment_max=mx,
                        segment_sum=mx.copy(), **extra)
            ops.merge_states(part, np.empty_like(q), segment_max=mx,
                             segment_sum=mx.copy())
            continue
        ops.unified(q, kc, kc, table, cu, su, np.empty_like(q), scale=scale,
                    causal=causal, schedule=s, **extra)
    sys.exit(0)
import torch  # noqa: E402
dev = "cuda"
q = torch.randn(B * QT, HQ, D, dtype=torch.bfloat16, device=dev)
kc, vc = (torch.randn(nb, BS, HK, D, device=dev).to(
    torch.float8_e4m3fn if FP8 else torch.bfloat16) for _ in range(2))
o = torch.empty_like(q)
t = lambda a: torch.as_tensor(a, device=dev)  # noqa: E731
half = torch.full((1,), 0.5, dtype=torch.float32, device=dev)
extra = dict(k_descale=half, v_descale=half) if FP8 else {}
width = 1 if FP8 else 2
nbytes = B * CTX * HK * D * 2 * width + 2 * B * QT * HQ * D * 2 + B * nblk * 4
ref = None
# (On the device once: converting them in each call timed the copies.)
table, cu, su = t(table), t(cu), t(su)
if SEG:
    part = torch.empty(q.shape[:2] + (SEG, D), dtype=torch.float32,
                       device=dev)
    mx, sm = (torch.empty(q.shape[:2] + (SEG,), dtype=torch.float32,
                          device=dev) for _ in range(2))
for s in SCHEDULES:
    def fn(s=s):
        if not SEG:
            return ops.unified(q, kc, vc, table, cu, su, o, scale=scale,
                               causal=causal, schedule=s, **extra)
        ops.unified(q, kc, vc, table, cu, su, part, scale=scale,
                    causal=causal, schedule=s, segment_max=mx,
                    segment_sum=sm, **extra)
        ops.merge_states(part, o, segment_max=mx, segment_sum=sm)
    fn()
    torch.cuda.synchronize()
    if ref is None:
        # The plan's output against a float64 reference on 4 sequences.
        worst = 0.0
        for b in range(min(4, B)):
            pages = table[b].long()
            kb, vb = ((c[pages].reshape(CTX, HK, D).double() *
                       (0.5 if FP8 else 1.0))
                      .repeat_interleave(HQ // HK, dim=1) for c in (kc, vc))
            qb = q[b * QT:(b + 1) * QT].double()
            s_ = torch.einsum("thd,khd->thk", qb, kb) * scale
            # Bottom-right causal: token i sees keys up to CTX - QT + i.
            keys = torch.arange(CTX, device=dev)
            last = CTX - QT + torch.arange(QT, device=dev)
            s_ = s_.masked_fill(keys[None, None, :] > last[:, None, None],
                                float("-inf"))
            want = torch.einsum("thk,khd->thd", s_.softmax(-1), vb)
            got = o[b * QT:(b + 1) * QT].double()
            worst = max(worst, (got - want).abs().max().item())
        print(f"plan: max|out - float64 reference| {worst:.2e} (4 sequences)")
        ref = o.clone()
    err = (o.float() - ref.float()).abs().max().item()
    start, end = torch.cuda.Event(True), torch.cuda.Event(True)
    start.record()
    for _ in range(50):
        fn()
    end.record()
    torch.cuda.synchronize()
    us = start.elapsed_time(end) / 50 * 1e3
    print(f"schedule {s or 'plan'}: {us:.1f} us, {nbytes / us / 1e3:.0f} GB/s,"
          f" max|diff to plan| {err:.2e}", flush=True)

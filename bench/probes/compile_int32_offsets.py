"""Probe (GPU machine): the dtypes of transformers-integration offsets when
the plan is built inside torch.compile on CUDA. On the H100 (torch 2.11) a
static-cache generate reached attn_mlir.unified with int64 cu_seqlens_q
although _Plan converts to int32; this prints what each step gives under
eager, aot_eager and inductor. Result (H100, torch 2.11): int32 at every
step. The cause was the plan object being built inside a traced frame
(reproduced on the CPU with torch 2.11 + transformers 5.17); _plan is now
made eagerly (integrations/transformers.py)."""
import sys

import torch

sys.path.insert(0, "python")
from attn_mlir.integrations import transformers as hf  # noqa: E402


def steps(mask):
    lq = mask.sum(1, dtype=torch.int32)
    c = lq.cumsum(0, dtype=torch.int32)
    zero = torch.zeros(1, dtype=torch.int32, device=mask.device)
    cat = torch.cat([zero, c])
    return lq, c, cat, cat.to(torch.int32)


def plan(mask):
    p = hf._Plan(mask.shape[0], 1, mask.shape[1], mask[:, -1:], mask,
                 mask.device)
    return p.cu_q, p.cu_k, p.lk


mask = torch.ones(3, 16, dtype=torch.bool, device="cuda")
mask[1, :5] = False
print("torch", torch.__version__)
for backend in ("eager", "aot_eager", "inductor"):
    for fn in (steps, plan):
        torch._dynamo.reset()
        f = fn if backend == "eager" else torch.compile(fn, backend=backend)
        try:
            print(backend, fn.__name__, [t.dtype for t in f(mask)])
        except Exception as e:  # noqa: BLE001 - a probe reports everything
            print(backend, fn.__name__, "raised", type(e).__name__, str(e)[:300])

"""Does compute-sanitizer's synccheck run a TMA + mbarrier kernel that is
not ours? PyTorch SDPA's cuDNN backend on an H100 (a warp-specialized
Hopper kernel) against the math backend, under
`compute-sanitizer --tool synccheck python3 bench/probes/synccheck_cudnn.py`.
"""
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa

torch.manual_seed(0)
q, k, v = (torch.randn(1, 8, 1024, 128, device="cuda", dtype=torch.bfloat16)
           for _ in range(3))
with sdpa_kernel(SDPBackend.MATH):
    ref = sdpa(q.float(), k.float(), v.float(), is_causal=True)
for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION):
    with sdpa_kernel(backend):
        out = sdpa(q, k, v, is_causal=True)
    torch.cuda.synchronize()
    err = (out.float() - ref).abs().max().item()
    print(f"{backend}: max|err| {err:.3e} {'ok' if err < 3e-2 else 'WRONG'}",
          flush=True)

"""Does PyTorch SDPA take fp8 e4m3 q/k/v on any backend (cuDNN, FA2,
memory-efficient)? For the fp8 row of bench_gpu.py, whose SDPA columns are
at bf16 when it does not:

    python3 bench/probes/sdpa_fp8.py
"""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

print(torch.__version__, torch.backends.cudnn.version())
q, k, v = (torch.randn(2, 16, 8192, 128, device="cuda").to(torch.float8_e4m3fn)
           for _ in range(3))
for be in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION,
           SDPBackend.EFFICIENT_ATTENTION):
    try:
        with sdpa_kernel(be):
            o = F.scaled_dot_product_attention(q, k, v)
        torch.cuda.synchronize()
        print(be, "ok", o.dtype)
    except Exception as e:
        print(be, "fails:", str(e).splitlines()[0][:200])
for name in ("_scaled_dot_product_cudnn_attention", "_cudnn_attention_forward"):
    print(name, hasattr(torch.ops.aten, name))

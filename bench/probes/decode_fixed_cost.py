"""Where split-KV decode's time goes that does not scale with the keys:
the drop-in's fused split + merge kernel, the split kernel alone (no
merge), and a device copy of the same bytes, at fixed segment counts over
a sweep of context lengths, in CUDA graphs (GQA 32/8, D=128, pages of
16). A line t = fixed + bytes / bandwidth through each column separates
a per-call cost from the streaming rate.

    python bench/probes/decode_fixed_cost.py
"""
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_gpu as G  # noqa: E402
from attn_mlir import ops  # noqa: E402

# (B, segments): contexts.
CASES = {(1, 32): (2048, 4096, 8192, 16384, 32768, 65536, 131072),
         (8, 4): (1024, 2048, 4096, 8192, 16384, 32768)}


def fit(xs, ys):
    slope, intercept = np.polyfit(np.asarray(xs, float), np.asarray(ys), 1)
    return intercept, 1 / slope / 1e3   # us, GB/s (bytes over us)


def main():
    D, Hq, Hk, bs = 128, 32, 8, 16
    scale = 1 / math.sqrt(D)
    for (B, segs), contexts in CASES.items():
        rows = []
        for ctx in contexts:
            q, o, kc, vc, bt, cu, su = G.paged_decode(B, ctx, Hq=Hq, Hk=Hk,
                                                      D=D, bs=bs)
            part = G.randn(B, Hq, segs, D, dtype="f32")
            smax = G.randn(B, Hq, segs, dtype="f32")
            ssum = G.randn(B, Hq, segs, dtype="f32")
            counters = G.ints(np.zeros((B, Hq), np.int32))
            fused = lambda: ops.unified(
                q, kc, vc, bt, cu, su, part, scale=scale, segment_max=smax,
                segment_sum=ssum, merged_out=o, merge_counters=counters)
            split = lambda: ops.unified(
                q, kc, vc, bt, cu, su, part, scale=scale, segment_max=smax,
                segment_sum=ssum)
            nbytes = B * ctx * Hk * D * 2 * 2
            if G.DRY:
                fused()
                split()
                continue
            tf, ts = G.timed_graph(fused) * 1e3, G.timed_graph(split) * 1e3
            src = G.torch.empty(nbytes // 2, dtype=G.torch.uint8, device="cuda")
            dst = G.torch.empty_like(src)
            tc = G.timed_graph(lambda: dst.copy_(src)) * 1e3
            rows.append((nbytes, tf, ts, tc))
            print(f"B={B} segments={segs} ctx={ctx}: {nbytes / 1e6:.1f} MB "
                  f"fused {tf:.1f} us ({nbytes / tf / 1e3:.0f} GB/s), split "
                  f"alone {ts:.1f} us, copy {tc:.1f} us "
                  f"({nbytes / tc / 1e3:.0f} GB/s): fused/copy "
                  f"{tc / tf:.2f}", flush=True)
        if rows:
            n = np.array([r[0] for r in rows])
            for i, what in ((1, "fused"), (2, "split alone"), (3, "copy")):
                f, bw = fit(n, [r[i] for r in rows])
                print(f"B={B} segments={segs} {what}: fixed {f:.1f} us + "
                      f"bytes at {bw:.0f} GB/s", flush=True)


if __name__ == "__main__":
    main()

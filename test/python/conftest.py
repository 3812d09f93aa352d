import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))


# ATTN_MLIR_TEST_DEVICE=cuda runs this whole suite on the GPU: every op call
# copies its (numpy or torch CPU) operands to CUDA memory, runs the GPU kernel
# through the same `_Call` (so the specialization is the one the CPU run
# compiles), and copies every operand back, so the tests' float64 checks see
# GPU results.
# (f32 calls run on TF32 tensor cores: reference.TOL.)
DEVICE = os.environ.get("ATTN_MLIR_TEST_DEVICE", "cpu")

if DEVICE == "cuda":
    import numpy as np

    from attn_mlir import ops
    from attn_mlir._abi import View

    def _to_device(v):
        """The operand's bytes on the GPU as an integer tensor (no dtype
        torch cannot compare), and its View there."""
        import torch
        host = v.owner
        if isinstance(host, torch.Tensor):   # torch CPU operands
            ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32,
                    8: torch.int64}
            t = host.detach().contiguous().view(ints[host.element_size()])
        else:
            ints = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}
            t = torch.from_numpy(np.ascontiguousarray(host).view(
                ints[host.dtype.itemsize]))
        t = t.cuda()
        return View(v.name, t.data_ptr(), t.shape, t.stride(), v.dtype, t), t

    def _writeable(host):
        return getattr(getattr(host, "flags", None), "writeable", True)

    def _copy_back(host, tensor):
        import torch
        if isinstance(host, torch.Tensor):
            host.copy_(tensor.cpu().view(host.dtype).reshape(host.shape))
        else:
            back = tensor.cpu().numpy().view(host.dtype).reshape(host.shape)
            np.copyto(host, back)

    # Operands past this size are snapshotted by checksums, not copies:
    # vLLM's grids pass two 2 GB caches per call, and a copy of each made a
    # process hold 8 GB of GPU memory (12 of them ran the H100 out).
    _BIG = 256 << 20

    def _sums(tensor):
        import torch
        flat = tensor.reshape(-1)
        words = flat.view(torch.int32) if flat.numel() * flat.element_size() \
            % 4 == 0 else flat.view(torch.uint8)
        total = torch.zeros(2, dtype=torch.int64, device=tensor.device)
        step = 1 << 24   # 16M words a chunk: bounded temporaries
        for at in range(0, words.numel(), step):
            w = words[at:at + step].to(torch.int64)
            pos = torch.arange(at, at + w.numel(), device=w.device) % 65521 + 1
            # A plain and a position-weighted sum: a stray write changes
            # both unless it is crafted to cancel.
            total[0] += w.sum()
            total[1] += (w * pos).sum()
        return total

    def _snapshot(tensor):
        nbytes = tensor.numel() * tensor.element_size()
        return ("sums", _sums(tensor)) if nbytes > _BIG else tensor.clone()

    def _unchanged(tensor, snapshot):
        import torch
        if isinstance(snapshot, tuple):
            return torch.equal(_sums(tensor), snapshot[1])
        return torch.equal(tensor, snapshot)

    _run_as_given = ops._Call.run

    def _run_on_gpu(self):
        import torch
        # Operands already on the GPU, or a metadata-only check (fake
        # tensors, torch_ops): the call as given.
        if self.device is not None or self.meta:
            return _run_as_given(self)
        text = self.text()
        if self.record(text):   # ATTN_MLIR_RECORD / ATTN_MLIR_DRY_RUN
            return
        copies, host_params = [], list(self.params)
        for i, (ssa, t, kind, value) in enumerate(self.params):
            if kind == "mem":
                dv, tensor = _to_device(value)
                # A device-side snapshot: only operands the kernel changed
                # come back (vLLM's grids pass 1 GB caches that no kernel
                # writes; copying them back dominated a test), and a stray
                # write into an input still reaches the host checks.
                snapshot = _snapshot(tensor) if _writeable(value.owner) \
                    else None
                copies.append((value.owner, tensor, snapshot))
                self.params[i] = (ssa, t, kind, dv)
        self.device = torch.device("cuda", torch.cuda.current_device())
        self._run_gpu(text)
        torch.cuda.synchronize()
        for host, tensor, snapshot in copies:
            if snapshot is None:   # an input (broadcast views)
                continue
            if _unchanged(tensor, snapshot):
                continue
            _copy_back(host, tensor)
        # Give the device copies back: several processes share the GPU in
        # bench/run_grid.py, and the caching allocator would keep each
        # one's largest test (GBs of caches) for good.
        self.params[:] = host_params
        self.device = None
        del copies
        torch.cuda.empty_cache()

    ops._Call.run = _run_on_gpu


# ATTN_MLIR_GRID_LOG=FILE: one line per finished test ("outcome id | reason"),
# written as each test ends, so a process stopped at a time limit
# (bench/run_grid.py --time-limit) still accounts for what it ran.
_GRID_LOG = os.environ.get("ATTN_MLIR_GRID_LOG")


def pytest_runtest_logreport(report):
    if not _GRID_LOG:
        return
    if report.when != "call" and not (report.failed or report.skipped):
        return
    reason = ""
    if report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        reason = crash.message if crash else str(report.longrepr)
        reason = " ".join(reason.split())[:400]
    with open(_GRID_LOG, "a") as f:
        f.write(f"{report.outcome} {report.nodeid} | {reason}\n")


def pytest_terminal_summary(terminalreporter):
    from reference import RECORDING_ONLY
    if RECORDING_ONLY:
        terminalreporter.write_line(
            "ATTN_MLIR_TEST_RECORD_ALL: a recording run, no kernel ran and "
            "no value was checked; 'passed' means only 'recorded'")

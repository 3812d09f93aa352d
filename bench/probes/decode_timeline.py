"""Where a split-KV decode launch spends its time: %globaltimer stamps per
program, from an instrumented copy of the kernel's PTX (measurement only).

Each bundle under PROBE_BUNDLES (the split decode kernels' directories) is
copied to /tmp with its PTX patched: thread 0 of every program stamps the
global timer into a module array `attn_probe` at
  entry     the kernel's first instruction
  issued    the first cp.async.commit_group (the first tile's copies issued)
  landed    after the first cp.async.wait_group (the first tile arrived)
  counted   before the fused merge's atom.global.add (the program's work
            done, its partials stored and fenced)
  answered  after that atomic
  exit      before ret
  merging   after the flag that names the last program (every program)
  storing   the merge's first output store (the last program only)
The copy loads as PTX (the driver compiles it); its manifest's hashes are
recomputed. Then the drop-in's decode (GQA 32/8, D=128, pages of 16) runs
PROBE_SHAPES (BxCTX) eagerly, the array is read back through the driver
(cuModuleGetGlobal on the kernel's module), and per-program phases are
summarized (us; medians and the spread over programs), beside the launch's
time from CUDA events and a graph replay.

    PROBE_BUNDLES=.device/b_seg PROBE_CACHES=bf16,fp8 \\
        PROBE_SHAPES=1x32768,8x8192 python bench/probes/decode_timeline.py

PROBE_VARIANT=empty runs the same launches with kernels that return at
once (empty0: and ask for no shared memory): what the launch costs alone;
evict_first gives the kernel's cp.async copies an L2 evict-first policy.
PROBE_FLUSH=read makes the eager call's L2 flush a read of 256 MB (clean
lines) instead of do_bench's zero fill (dirty lines).
"""
import ctypes
import hashlib
import json
import math
import os
import re
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_gpu as G  # noqa: E402
from bench_gpu import vllm  # noqa: E402
from attn_mlir import _gpu  # noqa: E402

D, HQ, HK, BS = 128, 32, 8, 16
SLOTS = ("entry", "issued", "landed", "counted", "answered", "exit",
         "merging", "storing")
MAX_PROGRAMS = 8192
env = os.environ.get
VARIANT = env("PROBE_VARIANT", "")
FLUSH = env("PROBE_FLUSH", "zero")


def stamp(slot, first=False):
    """The global timer (ns, comparable across SMs) at slot; `first`: the
    earliest of several visits. (None in the "_nostamp" variants: the
    patch's other changes alone.)"""
    if VARIANT.endswith("nostamp"):
        return ""
    out = "\tmov.u64 %prb2, %globaltimer;\n"
    if first:
        return out + (f"\t@%prp0 atom.global.min.u64 %prb3, "
                      f"[%prb0+{8 * slot}], %prb2;\n")
    return out + f"\t@%prp0 st.global.u64 [%prb0+{8 * slot}], %prb2;\n"


def patch(ptx, empty=False, evict_first=False, policy=None, only_first=False):
    lines = ptx.splitlines(keepends=True)
    out, in_entry, body, seen = [], False, False, set()
    for line in lines:
        s = line.strip()
        if s.startswith(".visible .entry") or s.startswith(".entry"):
            out.append(f".global .align 8 .b64 attn_probe[{MAX_PROGRAMS * len(SLOTS)}];"
                       "\n\n")
            in_entry = True
        if in_entry and not body and s == "{":
            out.append(line)
            out.append("\t.reg .b64 %prb<4>;\n\t.reg .b32 %prw<8>;\n"
                       "\t.reg .pred %prp<2>;\n\t.reg .b64 %prpol;\n"
                       "\t.reg .b32 %przdst, %prmask, %prlane;\n")
            continue
        if in_entry and not body and s and not s.startswith(".") and \
                not s.startswith("//") and s not in ("{", ")") and \
                not s.startswith("("):
            body = True
            out.append(
                "\tmov.u32 %prw0, %ctaid.x;\n\tmov.u32 %prw1, %ctaid.y;\n"
                "\tmov.u32 %prw2, %ctaid.z;\n\tmov.u32 %prw3, %nctaid.x;\n"
                "\tmov.u32 %prw4, %nctaid.y;\n"
                "\tmad.lo.u32 %prw1, %prw2, %prw4, %prw1;\n"
                "\tmad.lo.u32 %prw0, %prw1, %prw3, %prw0;\n"
                "\tmov.u32 %prw5, %tid.x;\n\tsetp.eq.u32 %prp0, %prw5, 0;\n"
                f"\tsetp.lt.u32 %prp1, %prw0, {MAX_PROGRAMS};\n"
                "\tand.pred %prp0, %prp0, %prp1;\n"
                f"\tmul.wide.u32 %prb0, %prw0, {8 * len(SLOTS)};\n"
                "\tmov.u64 %prb1, attn_probe;\n"
                "\tadd.u64 %prb0, %prb0, %prb1;\n"
                + ("\tcreatepolicy.fractional.L2::evict_first.b64 %prpol, 1.0;\n"
                   if policy is None else f"\tmov.b64 %prpol, {policy};\n")
                + stamp(0) +
                (stamp(5) + "\tret;\n" if empty else ""))
        if body and s == "ret;":
            out.append(stamp(5))
        if body and evict_first and s.startswith("cp.async.cg.shared.global [") \
                and not (only_first and "hinted" in seen):
            seen.add("hinted")
            # The K/V copies stream: their lines go first from L2. CUDA
            # 13.0's ptxas gives a hinted copy whose shared address it
            # splits into a register and a uniform offset ([R + UR0]) its
            # policy in a misaligned uniform pair (desc[UR1]), an illegal
            # instruction (bench/probes/cpasync_hint_fault.cu); the address
            # through a shuffle of the active lanes is one register.
            m = re.match(r"\s*cp\.async\.cg\.shared\.global \[(.+?)\], "
                         r"\[(.+?)\], 16(, \S+?)?;", line)
            dst, src, size = m.groups()
            base, _, off = dst.partition("+")
            line = (f"\tcvt.u32.u64 %przdst, {base};\n"
                    f"\tadd.u32 %przdst, %przdst, {off or 0};\n"
                    "\tactivemask.b32 %prmask;\n"
                    "\tmov.u32 %prlane, %laneid;\n"
                    "\tshfl.sync.idx.b32 %przdst, %przdst, %prlane, 0x1f, "
                    "%prmask;\n"
                    "\tcp.async.cg.shared.global.L2::cache_hint "
                    f"[%przdst], [{src}], 16{size or ''}, %prpol;\n")
        if body and s.startswith("atom.global.add.u32"):
            out.append(stamp(3))
            out.append(line)
            out.append(stamp(4))
            seen.add("answered")
            continue
        if body and "answered" in seen and "storing" not in seen and \
                "merging" in seen and s.startswith("st.global"):
            seen.add("storing")
            out.append(stamp(7, first=True))
        out.append(line)
        if body and "answered" in seen and "merging" not in seen and \
                s.startswith("ld.shared.b32"):
            seen.add("merging")
            out.append(stamp(6))
        if body and s.startswith("cp.async.commit_group") and \
                "issued" not in seen:
            seen.add("issued")
            out.append(stamp(1, first=True))
        if body and s.startswith("cp.async.wait_group") and \
                "landed" not in seen:
            seen.add("landed")
            out.append(stamp(2, first=True))
    return "".join(out)


def instrument(src, dst, variant=""):
    """variant "empty": the kernel returns after its entry stamp (the
    launch alone, same grid and footprint); "empty0": also no shared
    memory."""
    shutil.copytree(src, dst, dirs_exist_ok=True)
    man = json.loads((Path(src) / "manifest.json").read_text())
    ptx = patch((Path(src) / "kernel.ptx").read_text(),
                empty=variant.startswith("empty"),
                evict_first=variant.startswith("evict_first"),
                # (CUTLASS's CacheHintSm90::EVICT_FIRST encoding.)
                policy="0x12F0000000000000" if variant.endswith("const")
                else None, only_first=variant.endswith("one"))
    if variant.endswith("v87"):
        ptx = re.sub(r"^\.version \d+\.\d+", ".version 8.7", ptx, count=1,
                     flags=re.M)
    if variant == "empty0":
        for k in man["kernels"]:
            k["shared_bytes"] = 0
            k.pop("small_grid", None)
    (Path(dst) / "kernel.ptx").write_text(ptx)
    data = ptx.encode()
    man["binary"] = "kernel.ptx"
    if variant.endswith("cubin"):   # ptxas here instead of the driver
        import subprocess
        subprocess.run(["ptxas", "-arch=" + man["chip"], str(Path(dst) /
                        "kernel.ptx"), "-o", str(Path(dst) / "kernel.cubin")],
                       check=True)
        data = (Path(dst) / "kernel.cubin").read_bytes()
        man["binary"] = "kernel.cubin"
    man["binary_size"] = len(data)
    man["binary_sha256"] = hashlib.sha256(data).hexdigest()
    man["manifest_sha256"] = _gpu._manifest_digest(man)
    (Path(dst) / "manifest.json").write_text(json.dumps(man))
    return man["kernels"][0]["name"]


def probe_array():
    cuda = ctypes.CDLL("libcuda.so.1")
    found = []
    for kernels in _gpu._kernels.values():
        for k in kernels:
            ptr, size = ctypes.c_uint64(), ctypes.c_size_t()
            rc = cuda.cuModuleGetGlobal_v2(ctypes.byref(ptr), ctypes.byref(size),
                                           k._module, b"attn_probe")
            if rc == 0:
                found.append((k.record["name"], ptr.value, size.value))
    return cuda, found


def main():
    src = Path(env("PROBE_BUNDLES", ".device/b_seg"))
    dst = Path("/tmp/timeline_bundles")
    shutil.rmtree(dst, ignore_errors=True)
    for b in src.iterdir():
        if (b / "kernel.ptx").exists():
            print("instrumented", instrument(b, dst / b.name, VARIANT),
                  VARIANT, flush=True)
    os.environ["ATTN_MLIR_BUNDLES"] = str(dst)
    _gpu._kernels.clear()
    torch = G.torch
    for cache in env("PROBE_CACHES", "bf16,fp8").split(","):
        for shape in env("PROBE_SHAPES", "1x32768,8x8192").split(","):
            B, ctx = (int(x) for x in shape.split("x"))
            q, o, kc, vc, bt, cu, su = G.paged_decode(B, ctx, cache=cache)
            _, scales = G.cache_descales(cache)

            def call():
                vllm.unified_attention(
                    q, kc, vc, o, cu, 1, su, ctx, 1 / math.sqrt(D), True,
                    (-1, -1), bt, 0.0, None, scales.get("k_descale"),
                    scales.get("v_descale"))
            o.fill_(float("nan"))
            call()
            torch.cuda.synchronize()
            err = (o.float() - reference(q, kc, vc, bt, cache)).abs().max()
            cuda, arrays = probe_array()

            def clear():
                for _, ptr, size in arrays:
                    cuda.cuMemsetD8_v2(ctypes.c_uint64(ptr), 0xFF,
                                       ctypes.c_size_t(size))

            def read():
                for _, ptr, size in arrays:
                    buf = (ctypes.c_uint64 * (size // 8))()
                    cuda.cuMemcpyDtoH_v2(buf, ctypes.c_uint64(ptr),
                                         ctypes.c_size_t(size))
                    n = len(SLOTS)
                    progs = [buf[i * n:i * n + n]
                             for i in range(size // (8 * n))]
                    progs = [p for p in progs if p[0] != 2 ** 64 - 1]
                    if progs:
                        return progs
                return []

            # Eager, after an L2 flush as triton's do_bench makes one (a
            # 256 MB zero fill), then the last replay of the timed graph.
            flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
            clear()
            if FLUSH == "read":
                flush.sum()    # the same lines, clean
            else:
                flush.zero_()  # do_bench's: 256 MB of dirty lines
            call()
            torch.cuda.synchronize()
            eager = read()
            clear()
            torch.cuda.synchronize()
            graph_us = G.timed_graph(call) * 1e3
            torch.cuda.synchronize()
            replayed = read()
            width = 1 if cache == "fp8" else 2
            nbytes = B * ctx * HK * D * width * 2
            copy_us = nbytes / G.copy_ceiling(nbytes) / 1e3
            for how, progs in (("eager after a flush", eager),
                               ("last graph replay", replayed)):
                row = dict(cache=cache, B=B, ctx=ctx, variant=VARIANT,
                           flush=FLUSH,
                           run=how, graph_us=round(graph_us, 1),
                           max_abs_err=float(err),
                           copy_us=round(copy_us, 1))
                # (The earliest-visit stamps keep their minimum over all
                # replays: the replay's row leaves them out.)
                row.update(summarize(progs, () if how.startswith("eager")
                                     else FIRST_VISIT))
                print(json.dumps(row), flush=True)


def reference(q, kc, vc, bt, cache):
    """fp32 paged decode: every query head of a KV head over the
    sequence's pages (descale 0.5 for fp8 caches, as cache_descales)."""
    scale = 0.5 if cache == "fp8" else 1.0
    B = bt.shape[0]
    k = kc[bt.long()].float().reshape(B, -1, HK, D) * scale
    v = vc[bt.long()].float().reshape(B, -1, HK, D) * scale
    qf = q.float().reshape(B, HK, HQ // HK, D)
    s = G.torch.einsum("bgqd,bkgd->bgqk", qf, k) / math.sqrt(D)
    p = s.softmax(-1)
    return G.torch.einsum("bgqk,bkgd->bgqd", p, v).reshape(B, HQ, D)


FIRST_VISIT = ("issued", "landed", "storing")   # (stamps with atom.min)


def summarize(progs, skip=()):
    if not progs:
        return {}
    t0 = min(p[0] for p in progs)

    def us(v):
        return None if v == 2 ** 64 - 1 else (v - t0) / 1e3

    exits = [us(p[5]) for p in progs if us(p[5]) is not None]
    out = dict(programs=len(progs), span_us=round(max(exits), 1))
    for i, slot in enumerate(SLOTS):
        if slot in skip:
            continue
        vals = sorted(us(p[i]) for p in progs if us(p[i]) is not None)
        if vals:
            out[slot] = [round(vals[0], 2), round(statistics.median(vals), 2),
                         round(vals[-1], 2)]
    last = max(progs, key=lambda p: p[5])
    out["last_program"] = [None if us(v) is None or slot in skip
                           else round(us(v), 2)
                           for slot, v in zip(SLOTS, last)]
    return out


if __name__ == "__main__":
    main()

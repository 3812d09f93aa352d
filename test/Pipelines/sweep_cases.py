"""The kernels the resource sweeps compile: every attn kernel op over head
dims 24-256, bf16/f16/fp8/f32 inputs, fp8 caches, page sizes, split-KV and
block-sparse layouts, as MLIR text (written here, not through attn_mlir, so
that the sweeps need no Python runtime)."""
import os


def memref(*dims, t):
    return "memref<" + "x".join(str(d) for d in dims) + "x" + t + ">"


def flash(D, t="bf16", causal=True, hq=16, hk=16, quantize=False, lse=False):
    """quantize: t inputs quantized to fp8 e4m3 on load; lse: also store
    each row's log-sum-exp."""
    q, kv = memref("?", hq, D, t=t), memref("?", hk, D, t=t)
    out = memref("?", hq, D, t="bf16" if t.startswith("f8") else t)
    scales = ""
    args = ""
    if t.startswith("f8") or quantize:
        args = (", %qs: memref<1xf32>, %ks: memref<1xf32>, "
                "%vs: memref<1xf32>, %ps: memref<1xf32>")
        scales = (" q_scale(%qs : memref<1xf32>) k_scale(%ks : memref<1xf32>)"
                  " v_scale(%vs : memref<1xf32>) p_scale(%ps : memref<1xf32>)")
    lse_arg = lse_use = ""
    if lse:
        lse_arg = f", %lse: memref<?x{hq}xf32>"
        lse_use = f" lse(%lse : memref<?x{hq}xf32>)"
    attrs = ", ".join((["causal"] if causal else []) +
                      (["quantize_to = f8E4M3FN"] if quantize else []))
    attrs = f" {{{attrs}}}" if attrs else ""
    return (f"func.func @kernel(%q: {q}, %k: {kv}, %v: {kv}, "
            f"%cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32{args}, "
            f"%o: {out}{lse_arg}) {{\n"
            f"  attn.flash q(%q : {q}) k(%k : {kv}) v(%v : {kv}) "
            f"cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>)"
            f" scale(%s){scales} out(%o : {out}){lse_use}"
            f"{attrs}\n  return\n}}\n")


def prefix(D, cache=None, hq=32, hk=8, page=16, t="bf16", views=False):
    """views: q, k and v strided (views of one qkv projection, as vLLM
    passes them)."""
    cache = cache or t
    q, kv = memref("?", hq, D, t=t), memref("?", hk, D, t=t)
    if views:
        q, kv = (m[:-1] + ", strided<[?, ?, 1], offset: ?>>" for m in (q, kv))
    x = 4 if cache == "f32" else 8  # vLLM's 16 bytes
    kc = memref("?", hk, D // x, page, x, t=cache)
    vc = memref("?", hk, D, page, t=cache)
    args = scales = ""
    if cache != t:
        args = ", %ks: memref<1xf32>, %vs: memref<1xf32>"
        scales = " k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>)"
    return (f"func.func @kernel(%q: {q}, %k: {kv}, %v: {kv}, %kc: {kc}, "
            f"%vc: {vc}, %bt: memref<?x?xi32>, %qs: memref<?xi32>, "
            f"%sl: memref<?xi32>, %s: f32{args}, %o: {q}) {{\n"
            f"  attn.prefix_prefill q(%q : {q}) k(%k : {kv}) v(%v : {kv}) "
            f"k_cache(%kc : {kc}) v_cache(%vc : {vc}) "
            f"block_table(%bt : memref<?x?xi32>) query_start(%qs : memref<?xi32>)"
            f" seq_lens(%sl : memref<?xi32>) scale(%s){scales} out(%o : {q})\n"
            f"  return\n}}\n")


def unified(D, cache=None, hq=32, hk=8, page=16, segments=0, q8=False,
            t="bf16", lse=False, decode_rows=False):
    """`decode_rows`: the planning hint of decode rows (sm_90a over fp8
    caches: warps splitting the keys)."""
    cache = cache or t
    q = memref("?", hq, D, t=cache if q8 else t)
    kc = memref("?", page, hk, D, t=cache)
    args = scales = ""
    if q8:
        args = ", %qd: memref<1xf32>"
        scales = " q_descale(%qd : memref<1xf32>)"
    if cache != t:
        args += ", %ks: memref<1xf32>, %vs: memref<1xf32>"
        scales += (" k_descale(%ks : memref<1xf32>)"
                   " v_descale(%vs : memref<1xf32>)")
    if segments:
        # segments "?": the count is out's dim 2 at run time.
        o = memref("?", hq, segments, D, t="f32")
        stat = memref("?", hq, segments, t="f32")
        outs = f"%o: {o}, %m: {stat}, %l: {stat}"
        use = (f"out(%o : {o}) segment_max(%m : {stat}) "
               f"segment_sum(%l : {stat})")
    else:
        o = memref("?", hq, D, t=t)
        outs, use = f"%o: {o}", f"out(%o : {o})"
        if lse:
            outs += f", %lse: memref<?x{hq}xf32>"
            use += f" lse(%lse : memref<?x{hq}xf32>)"
    attrs = [f"num_segments = {segments} : i64"] if segments not in (
        0, "?") else []
    if decode_rows:
        attrs.append("attn.decode_rows")
    if attrs:
        use += " {" + ", ".join(attrs) + "}"
    return (f"func.func @kernel(%q: {q}, %kc: {kc}, %vc: {kc}, "
            f"%bt: memref<?x?xi32>, %cq: memref<?xi32>, %su: memref<?xi32>, "
            f"%s: f32{args}, {outs}) {{\n"
            f"  attn.unified q(%q : {q}) k_cache(%kc : {kc}) v_cache(%vc : {kc}) "
            f"block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cq : memref<?xi32>)"
            f" seqused_k(%su : memref<?xi32>) scale(%s){scales} {use}\n"
            f"  return\n}}\n")


def unified_prefill(D, hq=32, hk=8, page=16, t="bf16", features=False):
    """unified with the prefill-rows hint (sm_90a: the gathering producer
    warpgroup); `features`: a window, softcap, sinks and ALiBi together."""
    q, kc = memref("?", hq, D, t=t), memref("?", page, hk, D, t=t)
    args = uses = ""
    attrs = "attn.long_queries, attn.prefill_rows"
    if features:
        args = f", %c: f32, %al: memref<{hq}xf32>, %sk: memref<{hq}xf32>"
        uses = (f" softcap(%c) alibi_slopes(%al : memref<{hq}xf32>)"
                f" sinks(%sk : memref<{hq}xf32>)")
        attrs += ", sliding_window = 1024 : i64"
    return (f"func.func @kernel(%q: {q}, %kc: {kc}, %vc: {kc}, "
            f"%bt: memref<?x?xi32>, %cq: memref<?xi32>, %su: memref<?xi32>, "
            f"%s: f32{args}, %o: {q}) {{\n"
            f"  attn.unified q(%q : {q}) k_cache(%kc : {kc}) v_cache(%vc : {kc}) "
            f"block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cq : memref<?xi32>)"
            f" seqused_k(%su : memref<?xi32>) scale(%s){uses} out(%o : {q})"
            f" {{{attrs}}}\n  return\n}}\n")


def unified_vllm(D, kind, hq=32, hk=8, page=16):
    """unified with today's vLLM keywords, grouped as models use them:
    "spec": an fp8 cache with per-(sequence, KV head) descales, the tree bias
    and an output scale on a bf16 out (speculative decoding); "mm": sqrt ALiBi
    with bidirectional ranges clamped to the window; "rswa": R-SWA."""
    q, o = memref("?", hq, D, t="bf16"), memref("?", hq, D, t="bf16")
    cache = {"spec": "f8E4M3FN", "spec-q8": "f8E4M3FN", "int8": "i8",
             "fp8-token": "f8E4M3FN", "fp8-tree-alibi": "f8E4M3FN",
             "fp8-q-descales": "f8E4M3FN"}.get(kind, "bf16")
    kc = memref("?", page, hk, D, t=cache)
    if kind in ("spec-q8", "fp8-q-descales"):
        q = memref("?", hq, D, t="f8E4M3FN")
    if kind == "rswa":
        args = ", %p: memref<?xi32>"
        uses = " rswa_prefix_lens(%p : memref<?xi32>)"
        attrs = " {rswa_window = 128 : i64}"
    elif kind in ("spec", "spec-q8"):
        ds = f"memref<?x{hk}xf32, strided<[?, ?], offset: ?>>"
        args = (f", %ks: {ds}, %vs: {ds}, %qq: memref<?x?xf32>, "
                f"%os: memref<1xf32>")
        uses = (f" k_descale(%ks : {ds}) v_descale(%vs : {ds})"
                f" qq_bias(%qq : memref<?x?xf32>) out_scale(%os : memref<1xf32>)")
        if kind == "spec-q8":
            args += f", %qd: {ds}"
            uses = f" q_descale(%qd : {ds})" + uses
        attrs = ""
    elif kind == "fp8-q-descales":
        ds = f"memref<?x{hk}xf32, strided<[?, ?], offset: ?>>"
        args = f", %qd: {ds}, %ks: {ds}, %vs: {ds}"
        uses = (f" q_descale(%qd : {ds}) k_descale(%ks : {ds})"
                f" v_descale(%vs : {ds})")
        attrs = ""
    elif kind == "fp8-tree-alibi":
        args = (f", %ks: memref<1xf32>, %vs: memref<1xf32>,"
                f" %al: memref<{hq}xf32>, %qq: memref<?x?xf32>")
        uses = (" k_descale(%ks : memref<1xf32>) v_descale(%vs : memref<1xf32>)"
                f" alibi_slopes(%al : memref<{hq}xf32>)"
                " qq_bias(%qq : memref<?x?xf32>)")
        attrs = " {alibi_form = #attn.alibi<sqrt>}"
    elif kind in ("int8", "fp8-token"):
        sc = f"memref<?x{page}x{hk}xf32>"
        args = f", %ksc: {sc}, %vsc: {sc}"
        uses = f" k_scale_cache(%ksc : {sc}) v_scale_cache(%vsc : {sc})"
        attrs = ""
    elif kind == "flags":
        args = ", %f: memref<?xi8>"
        uses = " causal_flags(%f : memref<?xi8>)"
        attrs = " {sliding_window = 1024 : i64, chunk_lookback = 3 : i64}"
    elif kind == "bidirectional":
        args = uses = ""
        attrs = " {sliding_window = 512 : i64, bidirectional}"
    else:
        args = f", %al: memref<{hq}xf32>, %mm: memref<?x?x2xi32>"
        uses = (f" alibi_slopes(%al : memref<{hq}xf32>)"
                f" mm_prefix_range(%mm : memref<?x?x2xi32>)")
        attrs = (" {alibi_form = #attn.alibi<sqrt>, sliding_window = 1024 : i64,"
                 " mm_prefix_clamp_window}")
    return (f"func.func @kernel(%q: {q}, %kc: {kc}, %vc: {kc}, "
            f"%bt: memref<?x?xi32>, %cq: memref<?xi32>, %su: memref<?xi32>, "
            f"%s: f32{args}, %o: {o}) {{\n"
            f"  attn.unified q(%q : {q}) k_cache(%kc : {kc}) v_cache(%vc : {kc}) "
            f"block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cq : memref<?xi32>)"
            f" seqused_k(%su : memref<?xi32>) scale(%s){uses} out(%o : {o})"
            f"{attrs}\n  return\n}}\n")


def blocksparse(D, block=64, hq=32, hk=8, t="bf16", shared=False):
    q, kv = memref("?", hq, D, t=t), memref("?", hk, D, t=t)
    csr = f"memref<{1 if shared else hq}x?xi32>"
    return (f"func.func @kernel(%q: {q}, %k: {kv}, %v: {kv}, "
            f"%cq: memref<?xi32>, %ck: memref<?xi32>, %crow: {csr}, "
            f"%col: {csr}, %s: f32, %o: {q}) {{\n"
            f"  attn.blocksparse q(%q : {q}) k(%k : {kv}) v(%v : {kv}) "
            f"cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>)"
            f" crow(%crow : {csr}) col(%col : {csr}) scale(%s) out(%o : {q})"
            f" {{block_size = {block} : i64}}\n  return\n}}\n")


def grid_cases():
    """vllm_grid_kernels.mlir: kernels of vLLM's full grids, verbatim."""
    path = os.path.join(os.path.dirname(__file__), "vllm_grid_kernels.mlir")
    for chunk in open(path).read().split("// -----\n")[1:]:
        name, text = chunk.split("\n", 1)
        yield name.removeprefix("// name: "), text


def cases():
    yield from grid_cases()
    for D in (64, 80, 96, 128, 256):
        yield f"flash D={D} causal", flash(D)
    yield "flash D=112 f16", flash(112, t="f16", causal=False)
    yield "flash D=24 GQA", flash(24, hq=8, hk=2)
    # (sm_90a: three consumer warpgroups at 160 registers, the row lse too.)
    yield "flash D=64 GQA full lse", flash(64, causal=False, hq=16, hk=4,
                                           lse=True)
    yield "flash D=128 fp8", flash(128, t="f8E4M3FN")
    # (sm_90a: fp8 wgmma, V transposed by the producer.)
    yield "flash D=128 fp8 e5m2 GQA full lse", flash(
        128, t="f8E5M2", causal=False, hq=16, hk=4, lse=True)
    # (sm_90a: heads of 256 on fp8 wgmma at 24 + 240 registers; heads of 64
    # on three consumer warpgroups, GQA 8 packed into 192 rows.)
    yield "flash D=256 fp8", flash(256, t="f8E4M3FN")
    yield "flash D=256 fp8 e5m2 GQA full lse", flash(
        256, t="f8E5M2", causal=False, hq=16, hk=4, lse=True)
    yield "flash D=64 fp8 GQA8 lse", flash(64, t="f8E4M3FN", hq=16, hk=2,
                                           lse=True)
    for D in (64, 96, 128, 256):
        yield f"prefix D={D}", prefix(D)
    for D in (96, 128, 256):
        yield f"prefix D={D} fp8 cache", prefix(D, cache="f8E4M3FN")
    yield "prefix D=128 fp8 e5m2 cache", prefix(128, cache="f8E5M2")
    yield "prefix D=128 page 32", prefix(128, page=32)
    # One head a KV head (128 rows of one head: the gathering producer's
    # addresses) and eight (heads of 256 pack four).
    yield "prefix D=128 MHA", prefix(128, hq=8, hk=8)
    yield "prefix D=128 MHA fp8 cache", prefix(128, hq=8, hk=8,
                                               cache="f8E4M3FN")
    yield "prefix D=256 GQA 8", prefix(256, hq=32, hk=4)
    # q, k, v as views of one projection (run-time strides: the producer
    # addressed the new tokens' rows through them and spilled 24 bytes).
    yield "prefix D=128 qkv views", prefix(128, views=True)
    yield "prefix D=128 GQA 8 qkv views fp8 cache", prefix(
        128, hq=8, hk=1, views=True, cache="f8E4M3FN")
    for D in (64, 80, 96, 112, 128, 256):
        yield f"unified D={D}", unified(D)
    for D in (128, 256):
        yield f"unified D={D} fp8 cache", unified(D, cache="f8E4M3FN")
    yield "unified D=128 fp8 q", unified(128, cache="f8E4M3FN", q8=True)
    # Prefill rows (sm_90a: the gathering producer of prefix prefill over
    # NHD pages, whole pages by TMA): heads of 128 and 64 in GQA 4, MHA,
    # GQA 8 f16 over pages of 64, and the features its programs take
    # together.
    yield "unified D=128 prefill rows", unified_prefill(128)
    yield "unified D=64 prefill rows", unified_prefill(64)
    yield "unified D=128 prefill rows MHA", unified_prefill(128, hq=8, hk=8)
    yield "unified D=128 prefill rows GQA 8 f16 page 64", unified_prefill(
        128, hk=4, page=64, t="f16")
    yield "unified D=128 prefill rows window softcap sinks alibi", \
        unified_prefill(128, features=True)
    # Pages that are no whole TMA boxes (gathered) and pages of two tiles.
    yield "unified D=128 prefill rows page 48", unified_prefill(128, page=48)
    yield "unified D=64 prefill rows page 256", unified_prefill(64, page=256)
    yield "flash D=64 fp8 e5m2", flash(64, t="f8E5M2")
    yield "unified D=128 split-KV", unified(128, segments=16)
    yield "unified D=128 split-KV runtime count", unified(128, segments="?")
    # Decode rows over fp8 caches (sm_90a: four warps splitting the keys).
    yield "unified D=128 fp8 cache decode rows", unified(
        128, "f8E4M3FN", decode_rows=True)
    yield "unified D=80 f16 e5m2 cache decode rows GQA 8", unified(
        80, "f8E5M2", hq=16, hk=2, t="f16", decode_rows=True)
    yield "unified D=64 fp8 cache decode rows split-KV runtime count", unified(
        64, "f8E4M3FN", segments="?", decode_rows=True)
    yield "unified D=64 fp8 cache split-KV runtime count", unified(
        64, cache="f8E4M3FN", segments="?")
    for kind in ("spec", "spec-q8", "mm", "rswa", "int8", "fp8-token",
                 "flags", "bidirectional", "fp8-q-descales",
                 "fp8-tree-alibi"):
        yield f"unified D=128 vLLM {kind}", unified_vllm(128, kind)
    yield "unified D=64 vLLM int8", unified_vllm(64, "int8")
    for t in ("bf16", "f32"):
        yield f"flash D=128 {t} quantized on load", flash(128, t=t,
                                                          quantize=True)
    for D, block in ((64, 64), (80, 64), (96, 64), (112, 64), (128, 64),
                     (128, 16), (128, 128)):
        yield f"blocksparse D={D} block {block}", blocksparse(D, block)
    # One layout for every head: GQA packing (two warpgroups on sm_90a).
    yield "blocksparse D=128 block 64 shared", blocksparse(128, 64,
                                                           shared=True)
    # f32 q/k/v (tf32 mma.sync on NVVM).
    for D in (64, 128, 256):
        yield f"flash D={D} f32", flash(D, t="f32")
    yield "flash D=80 f32 GQA", flash(80, t="f32", causal=False, hq=8, hk=2)
    for D in (64, 128, 256):
        yield f"prefix D={D} f32", prefix(D, t="f32")
    for D in (64, 96, 128, 256):
        yield f"unified D={D} f32", unified(D, t="f32")
    yield "unified D=128 f32 split-KV", unified(128, segments=16, t="f32")
    yield "blocksparse D=64 block 64 f32", blocksparse(64, 64, t="f32")
    yield "blocksparse D=128 block 16 f32", blocksparse(128, 16, t="f32")
    # Row log-sum-exp for context-parallel merges.
    yield "flash D=128 causal lse", flash(128, lse=True)
    yield "flash D=64 f32 lse", flash(64, t="f32", lse=True)
    yield "unified D=128 lse", unified(128, lse=True)
    yield "unified D=128 fp8 cache lse", unified(128, cache="f8E4M3FN", lse=True)

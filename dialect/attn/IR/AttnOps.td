//===- AttnOps.td - attn dialect operations ----------------*- tablegen -*-===//
//
// One op per vLLM attention kernel plus attn.merge_states. All ops are in
// destination-passing style over memrefs; docs/semantics.md is the normative
// statement of the math, the descriptions below summarize it.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_IR_ATTNOPS_TD
#define ATTN_IR_ATTNOPS_TD

include "attn/IR/AttnDialect.td"
include "attn/IR/AttnAttrs.td"
include "attn/IR/AttnInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Operand kinds, named once so each op reads as its layout.
class Attn_In<string desc> : Arg<AnyMemRef, desc, [MemRead]>;
class Attn_OptIn<string desc> : Arg<Optional<AnyMemRef>, desc, [MemRead]>;
class Attn_Out<string desc> : Arg<AnyMemRef, desc, [MemWrite]>;
class Attn_OptOut<string desc> : Arg<Optional<AnyMemRef>, desc, [MemWrite]>;

//===----------------------------------------------------------------------===//
// attn.prefix_prefill
//===----------------------------------------------------------------------===//

def Attn_PrefixPrefillOp : Attn_Op<"prefix_prefill",
    [AttrSizedOperandSegments, Attn_KernelOpInterface]> {
  let summary = "new tokens over a paged KV-cache context, then causal";
  let description = [{
    vLLM's `context_attention_fwd`. Sequence `b` of the batch has
    `L_b = query_start[b+1] - query_start[b]` new tokens (rows
    `query_start[b] .. query_start[b+1]` of `q`, `k`, `v` and `out`) and
    `C_b = seq_lens[b] - L_b` tokens already in the paged cache. New token
    `i` sits at absolute position `C_b + i` and attends, for query head `h`
    and its KV head `h / (q_heads / kv_heads)`, to

    * every cached token `j < C_b` (read through `block_table[b, j / BS]`,
      no causal mask there), and
    * every new token `j <= i` (causal over the new tokens),

    restricted by `sliding_window = W` to keys with `qpos - kpos < W`.
    Scores are `scale * q.k` (+ the ALiBi bias `slope[h] * (kpos - qpos)`),
    the softmax denominator gains `exp(sinks[h])` when sinks are given, and
    the output row is `sum_j p_j v_j`; a row with no visible key is 0.

    Layouts (vLLM's):
    * `q`, `out`: `[tokens, q_heads, head_dim]`; `k`, `v`: `[tokens,
      kv_heads, head_dim]` (the new tokens' keys and values).
    * `k_cache`: `[num_blocks, kv_heads, head_dim / x, block_size, x]`,
      `v_cache`: `[num_blocks, kv_heads, head_dim, block_size]`.
    * `block_table`: `[batch, max_blocks_per_seq]` i32; `query_start`:
      `[batch + 1]` i32; `seq_lens`: `[batch]` i32 (context + new tokens).

    An fp8 cache (`f8E4M3FN` / `f8E5M2`) is dequantized as
    `float(x) * k_scale` / `float(x) * v_scale`; an fp8 `out` is written as
    `clamp(o / out_scale, fp8_min, fp8_max)` rounded to nearest-even.
    `skip_decode` leaves the rows of sequences with `L_b == 1` untouched.

    ```mlir
    attn.prefix_prefill q(%q : memref<?x32x128xbf16>)
        k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>)
        k_cache(%kc : memref<?x8x16x16x8xbf16>)
        v_cache(%vc : memref<?x8x128x16xbf16>)
        block_table(%bt : memref<?x?xi32>)
        query_start(%qs : memref<?xi32>) seq_lens(%sl : memref<?xi32>)
        scale(%scale) out(%o : memref<?x32x128xbf16>)
        {sliding_window = 4096 : i64}
    ```
  }];
  let arguments = (ins
    Attn_In<"queries [tokens, q_heads, head_dim]">:$q,
    Attn_In<"new keys [tokens, kv_heads, head_dim]">:$k,
    Attn_In<"new values [tokens, kv_heads, head_dim]">:$v,
    Attn_In<"key cache [blocks, kv_heads, head_dim/x, block_size, x]">:$k_cache,
    Attn_In<"value cache [blocks, kv_heads, head_dim, block_size]">:$v_cache,
    Attn_In<"block table [batch, max_blocks] i32">:$block_table,
    Attn_In<"query start offsets [batch+1] i32">:$query_start,
    Attn_In<"sequence lengths (context + new) [batch] i32">:$seq_lens,
    F32:$scale,
    Attn_OptIn<"fp8 key-cache scale [1] f32">:$k_scale,
    Attn_OptIn<"fp8 value-cache scale [1] f32">:$v_scale,
    Attn_OptIn<"ALiBi slopes [q_heads] f32">:$alibi_slopes,
    Attn_OptIn<"attention sinks [q_heads] f32">:$sinks,
    Attn_OptIn<"fp8 output scale [1] f32">:$out_scale,
    Attn_Out<"output [tokens, q_heads, head_dim]">:$out,
    OptionalAttr<I64Attr>:$sliding_window,
    UnitAttr:$skip_decode,
    OptionalAttr<Attn_AlibiFormAttr>:$alibi_form,
    OptionalAttr<Attn_ScheduleAttr>:$schedule
  );
  let assemblyFormat = [{
    `q` `(` $q `:` type($q) `)`
    `k` `(` $k `:` type($k) `)`
    `v` `(` $v `:` type($v) `)`
    `k_cache` `(` $k_cache `:` type($k_cache) `)`
    `v_cache` `(` $v_cache `:` type($v_cache) `)`
    `block_table` `(` $block_table `:` type($block_table) `)`
    `query_start` `(` $query_start `:` type($query_start) `)`
    `seq_lens` `(` $seq_lens `:` type($seq_lens) `)`
    `scale` `(` $scale `)`
    (`k_scale` `(` $k_scale^ `:` type($k_scale) `)`)?
    (`v_scale` `(` $v_scale^ `:` type($v_scale) `)`)?
    (`alibi_slopes` `(` $alibi_slopes^ `:` type($alibi_slopes) `)`)?
    (`sinks` `(` $sinks^ `:` type($sinks) `)`)?
    (`out_scale` `(` $out_scale^ `:` type($out_scale) `)`)?
    `out` `(` $out `:` type($out) `)`
    attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // AttnKernelOpInterface.
    ::mlir::Value getQueryOffsets() { return getQueryStart(); }
    ::mlir::Value getKeySource() { return getKCache(); }
    int64_t getGridSplits() { return 1; }
    int64_t getHeadDim();
    int64_t getNumQueryHeads();
    int64_t getNumKvHeads();
    int64_t getBlockSize();
    /// The `x` of vLLM's split key-cache layout.
    int64_t getKeySplit();
    AlibiForm getAlibiFormOrDefault() {
      return getAlibiForm().value_or(AlibiForm::relative);
    }
  }];
}

//===----------------------------------------------------------------------===//
// attn.unified
//===----------------------------------------------------------------------===//

def Attn_UnifiedOp : Attn_Op<"unified", [AttrSizedOperandSegments,
    Attn_KernelOpInterface]> {
  let summary = "mixed prefill + decode attention over a paged NHD cache";
  let description = [{
    vLLM's `unified_attention`. Sequence `b` has `L_b = cu_seqlens_q[b+1] -
    cu_seqlens_q[b]` query tokens and `N_b = seqused_k[b]` keys in the paged
    cache, the queries being the last `L_b` of them: query `i` is at position
    `C_b + i` with `C_b = N_b - L_b`. Attention is causal (key `j` visible
    when `j <= C_b + i`), optionally windowed (`qpos - kpos <
    sliding_window`; vLLM's `window_size[0] = w` maps to `w + 1`), with score
    `scale * q.k`, then `softcap * tanh(s / softcap)` when `softcap` is given,
    then the ALiBi bias (`context` form by default: `slope[h] * (kpos -
    C_b)`). `sinks[h]` joins the softmax denominator.

    Layouts: `q`, `out`: `[tokens, q_heads, head_dim]`; `k_cache`,
    `v_cache`: `[num_blocks, block_size, kv_heads, head_dim]`; `block_table`:
    `[batch, max_blocks]` i32; `cu_seqlens_q`: `[batch+1]` i32;
    `seqused_k`: `[batch]` i32. fp8 caches are dequantized with
    `k_descale` / `v_descale`; an fp8 `q` with `q_descale` (then the caches
    must be fp8 too). A descale is one value (`memref<f32>`, `memref<1xf32>`)
    or one per sequence and KV head (`[batch, kv_heads]`, any strides: vLLM's
    `expand`ed scalars and FlashAttention-3's per-(sequence, head) scales);
    sequence `b` and query head `h` use entry `[b, h / (q_heads / kv_heads)]`.
    `out_scale` quantizes the output to the fp8 range (required for an fp8
    `out`).

    Split-KV form (`segment_max` and `segment_sum` given): the key range
    `[0, N_b)` of each sequence is cut into `S` segments of
    `ceil(N_b / (S * BS))` pages and the op writes, per segment, the
    unnormalized accumulator to `out` (`[tokens, q_heads, S, head_dim]`
    f32), the running max to `segment_max` and the exp-sum to `segment_sum`
    (`[tokens, q_heads, S]` f32), in the `exp` (natural) domain; empty
    segments write (0, -inf, 0). `attn.merge_states` combines them. `S` is
    the `num_segments` attribute when given (a kernel per segment count), or
    else `out`'s dim 2 at run time: one kernel for every segment count,
    chosen per call by the caller (a planner) through the size of the
    buffers it passes (at most 4096 segments).

    Fused merge (split-KV form with `merged_out` and `merge_counters`): the
    op also writes `merged_out` (`[tokens, q_heads, head_dim]`, as `out` of
    the one-pass form) exactly as `attn.merge_states` of its segments would,
    with `sinks` and `out_scale` applied there, in one launch: the program
    of a tile's last segment to finish merges the tile's rows.
    `merge_counters` (`[tokens, q_heads]` i32) must hold zeros; every
    completed launch leaves them zero again (one buffer serves every call
    and a CUDA graph's replays).

    `lse` (`[tokens, q_heads]` f32; in the split-KV form only with the fused
    merge, over all segments) receives each row's log-sum-exp
    `log(sum_j exp(s_j))` over its visible keys (plus `sinks[h]` when
    given), natural log; `-inf` for a row that sees no key.
    Outputs over disjoint key ranges then merge exactly with
    `attn.merge_states` (`segment_lse`): context parallelism.

    Masks beyond causal: `bidirectional` drops the causal mask (every key
    `j < N_b` is visible; a window then also bounds `kpos - qpos <
    sliding_window`); `causal_flags[b]` (i8) picks causal (non-zero) or
    bidirectional per sequence. `chunk_lookback = L` (with `sliding_window =
    W`) replaces the window by chunked attention: with `C = W / (L + 1)`,
    key `j` is visible to query position `p` when `p / C - j / C <= L`.

    Query-count ranges (`min_query_len`, `max_query_len`, either or both,
    at least 1): the op computes only the sequences whose `L_b` lies in the
    range; the rows of the other sequences, in every output, are left as
    they are. A mixed batch then runs as two ops over the same operands,
    one for its decodes and one for its prefills, each with the program
    shape that suits it (ops.unified does this for the batches it deems
    mixed; no device value is read to decide).

    Partials by sequence (`sequence_partials`, split-KV form with
    `max_query_len = R`): the rows of `out`, `segment_max`, `segment_sum`
    and `merge_counters` are `b * R + i` for query `i` of sequence `b`
    (`batch * R` rows) instead of the token: a mixed batch's decode op then
    splits its keys over a workspace sized by its sequences, not by the
    batch's tokens. `merged_out` and `lse` stay indexed by token.

    Per-token-head scale caches (vLLM's `kv_quant_mode` 2 and 3): with
    `k_scale_cache` / `v_scale_cache` (`[num_blocks, block_size, kv_heads]`
    f32) the caches hold i8 or fp8 values and key `j` of KV head `g` is
    `k_cache[blk, off, g, :] * k_scale_cache[blk, off, g]` (the same for v),
    `blk = block_table[b, j / BS]`, `off = j % BS`.

    ```mlir
    attn.unified q(%q : memref<?x32x128xbf16>)
        k_cache(%kc : memref<?x16x8x128xbf16>)
        v_cache(%vc : memref<?x16x8x128xbf16>)
        block_table(%bt : memref<?x?xi32>)
        cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>)
        scale(%scale) softcap(%cap) out(%o : memref<?x32x128xbf16>)
    ```
  }];
  let arguments = (ins
    Attn_In<"queries [tokens, q_heads, head_dim]">:$q,
    Attn_In<"key cache [blocks, block_size, kv_heads, head_dim]">:$k_cache,
    Attn_In<"value cache [blocks, block_size, kv_heads, head_dim]">:$v_cache,
    Attn_In<"block table [batch, max_blocks] i32">:$block_table,
    Attn_In<"query start offsets [batch+1] i32">:$cu_seqlens_q,
    Attn_In<"keys per sequence [batch] i32">:$seqused_k,
    F32:$scale,
    Optional<F32>:$softcap,
    Attn_OptIn<"fp8 query descale [1] or [batch, kv_heads] f32">:$q_descale,
    Attn_OptIn<"fp8 key-cache descale [1] or [batch, kv_heads] f32">:$k_descale,
    Attn_OptIn<"fp8 value-cache descale [1] or [batch, kv_heads] f32">:$v_descale,
    Attn_OptIn<"ALiBi slopes [q_heads] f32">:$alibi_slopes,
    Attn_OptIn<"attention sinks [q_heads] f32">:$sinks,
    Attn_OptIn<"tree speculative-decoding bias [qq_rows, qq_cols]">:$qq_bias,
    Attn_OptIn<"bidirectional ranges [batch, ranges, 2] i32">:$mm_prefix_range,
    Attn_OptIn<"R-SWA prompt lengths [batch] i32">:$rswa_prefix_lens,
    Attn_OptIn<"per-token-head key scales [blocks, block_size, kv_heads] f32">:$k_scale_cache,
    Attn_OptIn<"per-token-head value scales [blocks, block_size, kv_heads] f32">:$v_scale_cache,
    Attn_OptIn<"per-sequence causal flags [batch] i8 (0: bidirectional)">:$causal_flags,
    Attn_OptIn<"fp8 output scale [1] f32">:$out_scale,
    Attn_Out<"output [tokens, q_heads, head_dim], or partial accumulators "
             "[tokens, q_heads, segments, head_dim] f32">:$out,
    Attn_OptOut<"segment row max [tokens, q_heads, segments] f32">:$segment_max,
    Attn_OptOut<"segment exp-sum [tokens, q_heads, segments] f32">:$segment_sum,
    Attn_OptOut<"row log-sum-exp [tokens, q_heads] f32">:$lse,
    Attn_OptOut<"merged output [tokens, q_heads, head_dim] (split-KV form)">:$merged_out,
    Attn_OptOut<"arrival counters [tokens, q_heads] i32, zero">:$merge_counters,
    OptionalAttr<I64Attr>:$sliding_window,
    OptionalAttr<I64Attr>:$num_segments,
    OptionalAttr<Attn_AlibiFormAttr>:$alibi_form,
    OptionalAttr<I64Attr>:$rswa_window,
    UnitAttr:$mm_prefix_clamp_window,
    UnitAttr:$bidirectional,
    OptionalAttr<I64Attr>:$chunk_lookback,
    OptionalAttr<I64Attr>:$min_query_len,
    OptionalAttr<I64Attr>:$max_query_len,
    UnitAttr:$sequence_partials,
    OptionalAttr<Attn_ScheduleAttr>:$schedule
  );
  let assemblyFormat = [{
    `q` `(` $q `:` type($q) `)`
    `k_cache` `(` $k_cache `:` type($k_cache) `)`
    `v_cache` `(` $v_cache `:` type($v_cache) `)`
    `block_table` `(` $block_table `:` type($block_table) `)`
    `cu_seqlens_q` `(` $cu_seqlens_q `:` type($cu_seqlens_q) `)`
    `seqused_k` `(` $seqused_k `:` type($seqused_k) `)`
    `scale` `(` $scale `)`
    (`softcap` `(` $softcap^ `)`)?
    (`q_descale` `(` $q_descale^ `:` type($q_descale) `)`)?
    (`k_descale` `(` $k_descale^ `:` type($k_descale) `)`)?
    (`v_descale` `(` $v_descale^ `:` type($v_descale) `)`)?
    (`alibi_slopes` `(` $alibi_slopes^ `:` type($alibi_slopes) `)`)?
    (`sinks` `(` $sinks^ `:` type($sinks) `)`)?
    (`qq_bias` `(` $qq_bias^ `:` type($qq_bias) `)`)?
    (`mm_prefix_range` `(` $mm_prefix_range^ `:` type($mm_prefix_range) `)`)?
    (`rswa_prefix_lens` `(` $rswa_prefix_lens^ `:` type($rswa_prefix_lens) `)`)?
    (`k_scale_cache` `(` $k_scale_cache^ `:` type($k_scale_cache) `)`)?
    (`v_scale_cache` `(` $v_scale_cache^ `:` type($v_scale_cache) `)`)?
    (`causal_flags` `(` $causal_flags^ `:` type($causal_flags) `)`)?
    (`out_scale` `(` $out_scale^ `:` type($out_scale) `)`)?
    `out` `(` $out `:` type($out) `)`
    (`segment_max` `(` $segment_max^ `:` type($segment_max) `)`)?
    (`segment_sum` `(` $segment_sum^ `:` type($segment_sum) `)`)?
    (`lse` `(` $lse^ `:` type($lse) `)`)?
    (`merged_out` `(` $merged_out^ `:` type($merged_out) `)`)?
    (`merge_counters` `(` $merge_counters^ `:` type($merge_counters) `)`)?
    attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // AttnKernelOpInterface.
    ::mlir::Value getQueryOffsets() { return getCuSeqlensQ(); }
    ::mlir::Value getKeySource() { return getKCache(); }
    /// The split-KV form merges its own segments (merged_out given).
    bool fusesMerge() { return bool(getMergedOut()); }
    /// Static segment count; 0 where it is out's dim 2 at run time.
    int64_t getGridSplits() {
      if (!isSplitKv())
        return 1;
      return getNumSegmentsAttr() ? getNumSegmentsAttr().getInt() : 0;
    }
    int64_t getHeadDim();
    int64_t getNumQueryHeads();
    int64_t getNumKvHeads();
    int64_t getBlockSize();
    bool isSplitKv() {
      return getNumSegments().has_value() || getSegmentMax();
    }
    AlibiForm getAlibiFormOrDefault() {
      return getAlibiForm().value_or(AlibiForm::context);
    }
    /// bidirectional, causal_flags and chunk_lookback.
    ::llvm::LogicalResult verifyCausality();
    /// min_query_len and max_query_len.
    ::llvm::LogicalResult verifyQueryLenRange();
    bool hasTokenScales() { return getKScaleCache() != nullptr; }
  }];
}

//===----------------------------------------------------------------------===//
// attn.flash
//===----------------------------------------------------------------------===//

def Attn_FlashOp : Attn_Op<"flash", [AttrSizedOperandSegments,
    Attn_KernelOpInterface]> {
  let summary = "varlen FlashAttention-2 forward: causal, bias, dropout, fp8";
  let description = [{
    vLLM's `triton_attention`. Sequence `b` has `Lq = cu_seqlens_q[b+1] -
    cu_seqlens_q[b]` queries and `Lk = cu_seqlens_k[b+1] - cu_seqlens_k[b]`
    keys. With `causal`, the mask is aligned bottom-right: query `i` sees key
    `j` when `j <= i + Lk - Lq`, so queries with `i < Lq - Lk` see nothing
    and output 0. The score is `scale * q.k + bias[b', h, i, j]` (`b' = b`,
    or 0 when `bias` has one batch row). With dropout, the probabilities
    (after normalization) are kept where the Philox-4x32-10 uniform at
    counter `philox_offset + ((b * q_heads + h) * Lq + i) * Lk + j` under key
    `philox_seed` exceeds `dropout_p`, and scaled by `1 / (1 - dropout_p)`.

    fp8: when `q`, `k`, `v` are fp8 the four scales are required; scores use
    `scale * q_scale * k_scale`, the probabilities are quantized as
    `p / p_scale` to the type of `v` before the PV product, whose result is
    multiplied by `p_scale * v_scale`. An fp8 `out` uses `out_scale`.
    Quantize on load: with `quantize_to = T` (an fp8 type) and the four
    scales, each of `q`, `k`, `v` whose element type is not `T` is quantized
    as it is loaded, exactly as vLLM's wrapper does before its launch: `x`
    becomes `T(clamp(round_X(x * (1 / s)), -max_T, max_T))` (`round_X`:
    rounding to `x`'s own type, `s` its scale), and the op proceeds as if it
    had been given the quantized tensor.

    `lse` (`[total_q, q_heads]` f32) receives each row's log-sum-exp
    `log(sum_j exp(s_j))` over its visible keys (before dropout), natural
    log; `-inf` for a row that sees no key. Outputs over disjoint key
    ranges then merge exactly with `attn.merge_states` (`segment_lse`).

    Layouts: `q`, `out`: `[total_q, q_heads, head_dim]`; `k`, `v`:
    `[total_k, kv_heads, head_dim]`; `cu_seqlens_q/k`: `[batch+1]` i32;
    `bias`: `[1 or batch, q_heads, max_seqlen_q, max_seqlen_k]`.

    ```mlir
    attn.flash q(%q : memref<?x16x128xf16>) k(%k : memref<?x16x128xf16>)
        v(%v : memref<?x16x128xf16>)
        cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>)
        scale(%scale) out(%o : memref<?x16x128xf16>) {causal}
    ```
  }];
  let arguments = (ins
    Attn_In<"queries [total_q, q_heads, head_dim]">:$q,
    Attn_In<"keys [total_k, kv_heads, head_dim]">:$k,
    Attn_In<"values [total_k, kv_heads, head_dim]">:$v,
    Attn_In<"query offsets [batch+1] i32">:$cu_seqlens_q,
    Attn_In<"key offsets [batch+1] i32">:$cu_seqlens_k,
    F32:$scale,
    Attn_OptIn<"additive bias [1|batch, q_heads, max_q, max_k]">:$bias,
    Optional<F32>:$dropout_p,
    Optional<I64>:$philox_seed,
    Optional<I64>:$philox_offset,
    Attn_OptIn<"fp8 query scale [1] f32">:$q_scale,
    Attn_OptIn<"fp8 key scale [1] f32">:$k_scale,
    Attn_OptIn<"fp8 value scale [1] f32">:$v_scale,
    Attn_OptIn<"fp8 probability scale [1] f32">:$p_scale,
    Attn_OptIn<"fp8 output scale [1] f32">:$out_scale,
    Attn_Out<"output [total_q, q_heads, head_dim]">:$out,
    Attn_OptOut<"row log-sum-exp [total_q, q_heads] f32">:$lse,
    UnitAttr:$causal,
    OptionalAttr<TypeAttr>:$quantize_to,
    OptionalAttr<Attn_ScheduleAttr>:$schedule
  );
  let assemblyFormat = [{
    `q` `(` $q `:` type($q) `)`
    `k` `(` $k `:` type($k) `)`
    `v` `(` $v `:` type($v) `)`
    `cu_seqlens_q` `(` $cu_seqlens_q `:` type($cu_seqlens_q) `)`
    `cu_seqlens_k` `(` $cu_seqlens_k `:` type($cu_seqlens_k) `)`
    `scale` `(` $scale `)`
    (`bias` `(` $bias^ `:` type($bias) `)`)?
    (`dropout` `(` $dropout_p^ `,` $philox_seed `,` $philox_offset `)`)?
    (`q_scale` `(` $q_scale^ `:` type($q_scale) `)`)?
    (`k_scale` `(` $k_scale^ `:` type($k_scale) `)`)?
    (`v_scale` `(` $v_scale^ `:` type($v_scale) `)`)?
    (`p_scale` `(` $p_scale^ `:` type($p_scale) `)`)?
    (`out_scale` `(` $out_scale^ `:` type($out_scale) `)`)?
    `out` `(` $out `:` type($out) `)`
    (`lse` `(` $lse^ `:` type($lse) `)`)?
    attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // AttnKernelOpInterface.
    ::mlir::Value getQueryOffsets() { return getCuSeqlensQ(); }
    ::mlir::Value getKeySource() { return getK(); }
    int64_t getGridSplits() { return 1; }
    int64_t getHeadDim();
    int64_t getNumQueryHeads();
    int64_t getNumKvHeads();
    bool hasDropout() { return getDropoutP() != nullptr; }
  }];
}

//===----------------------------------------------------------------------===//
// attn.blocksparse
//===----------------------------------------------------------------------===//

def Attn_BlockSparseOp : Attn_Op<"blocksparse",
    [Attn_KernelOpInterface]> {
  let summary = "block-sparse attention over a per-head CSR block layout";
  let description = [{
    vLLM's `blocksparse_flash_attn_varlen_fwd`. Sequence `b` has `Lk` keys
    and either `Lq = Lk` queries (prefill) or `Lq = 1` (decode); query `i`
    sits at position `p = Lk - Lq + i`. For head `h` (layout row `h`, or row
    0 when the layout has a single head row) query `p` sees key `j` when
    `j <= p` and key block `j / block_size` is one of
    `col[h, crow[h, r] .. crow[h, r+1]]` with `r = p / q_block_size`
    (`q_block_size` defaults to `block_size`). Score `scale * q.k`; a row with
    no visible key outputs 0.

    Layouts: `q`, `out`: `[total_q, q_heads, head_dim]`; `k`, `v`:
    `[total_k, kv_heads, head_dim]`; `crow`: `[1|q_heads, rows+1]` i32,
    non-decreasing per head; `col`: `[1|q_heads, nnz]` i32 key-block ids.

    ```mlir
    attn.blocksparse q(%q : memref<?x16x128xbf16>)
        k(%k : memref<?x16x128xbf16>) v(%v : memref<?x16x128xbf16>)
        cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>)
        crow(%crow : memref<16x257xi32>) col(%col : memref<16x?xi32>)
        scale(%scale) out(%o : memref<?x16x128xbf16>)
        {block_size = 64 : i64}
    ```
  }];
  let arguments = (ins
    Attn_In<"queries [total_q, q_heads, head_dim]">:$q,
    Attn_In<"keys [total_k, kv_heads, head_dim]">:$k,
    Attn_In<"values [total_k, kv_heads, head_dim]">:$v,
    Attn_In<"query offsets [batch+1] i32">:$cu_seqlens_q,
    Attn_In<"key offsets [batch+1] i32">:$cu_seqlens_k,
    Attn_In<"CSR row pointers [1|q_heads, rows+1] i32">:$crow,
    Attn_In<"CSR column (key block) ids [1|q_heads, nnz] i32">:$col,
    F32:$scale,
    Attn_Out<"output [total_q, q_heads, head_dim]">:$out,
    I64Attr:$block_size,
    OptionalAttr<I64Attr>:$q_block_size,
    OptionalAttr<Attn_ScheduleAttr>:$schedule
  );
  let assemblyFormat = [{
    `q` `(` $q `:` type($q) `)`
    `k` `(` $k `:` type($k) `)`
    `v` `(` $v `:` type($v) `)`
    `cu_seqlens_q` `(` $cu_seqlens_q `:` type($cu_seqlens_q) `)`
    `cu_seqlens_k` `(` $cu_seqlens_k `:` type($cu_seqlens_k) `)`
    `crow` `(` $crow `:` type($crow) `)`
    `col` `(` $col `:` type($col) `)`
    `scale` `(` $scale `)`
    `out` `(` $out `:` type($out) `)`
    attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // AttnKernelOpInterface.
    ::mlir::Value getQueryOffsets() { return getCuSeqlensQ(); }
    ::mlir::Value getKeySource() { return getK(); }
    int64_t getGridSplits() { return 1; }
    int64_t getHeadDim();
    int64_t getNumQueryHeads();
    int64_t getNumKvHeads();
    int64_t getQueryBlockSize() {
      return getQBlockSizeAttr() ? getQBlockSizeAttr().getInt()
                                 : getBlockSizeAttr().getInt();
    }
    bool hasPerHeadLayout();
  }];
}

//===----------------------------------------------------------------------===//
// attn.merge_states
//===----------------------------------------------------------------------===//

def Attn_MergeStatesOp : Attn_Op<"merge_states", [AttrSizedOperandSegments]> {
  let summary = "combine split-KV partial outputs";
  let description = [{
    Combines `S` partial attention results per (token, head). Two forms:

    * max/sum (what `attn.unified` with `num_segments` writes): `partial`
      holds unnormalized accumulators `a_s`, `segment_max` the row maxima
      `m_s` and `segment_sum` the exp-sums `l_s`. With `M = max_s m_s`,
      `out = sum_s exp(m_s - M) a_s / sum_s exp(m_s - M) l_s`.
    * LSE: `partial` holds normalized outputs `o_s` and `segment_lse` the
      log-sum-exps `lse_s`; `out = sum_s exp(lse_s - M) o_s / sum_s
      exp(lse_s - M)` with `M = max_s lse_s`. These partials may be f16 or
      bf16 (flash's outputs as they are); they are widened to f32 on load.

    Segments with `m_s = -inf` (or `lse_s = -inf`) contribute nothing; a row
    whose segments are all empty outputs 0. `sinks` (`[heads]` f32) add
    `exp(sinks[h] - M)` to the denominator; an fp8 `out` uses `out_scale`.

    ```mlir
    attn.merge_states partial(%acc : memref<?x32x16x128xf32>)
        segment_max(%m : memref<?x32x16xf32>)
        segment_sum(%l : memref<?x32x16xf32>)
        out(%o : memref<?x32x128xbf16>)
    ```
  }];
  let arguments = (ins
    Attn_In<"partial outputs [tokens, heads, segments, head_dim] f32 (f16/bf16 in the LSE form)">:$partial,
    Attn_OptIn<"segment row max [tokens, heads, segments] f32">:$segment_max,
    Attn_OptIn<"segment exp-sum [tokens, heads, segments] f32">:$segment_sum,
    Attn_OptIn<"segment log-sum-exp [tokens, heads, segments] f32">:$segment_lse,
    Attn_OptIn<"attention sinks [heads] f32">:$sinks,
    Attn_OptIn<"fp8 output scale [1] f32">:$out_scale,
    Attn_Out<"output [tokens, heads, head_dim]">:$out
  );
  let assemblyFormat = [{
    `partial` `(` $partial `:` type($partial) `)`
    (`segment_max` `(` $segment_max^ `:` type($segment_max) `)`)?
    (`segment_sum` `(` $segment_sum^ `:` type($segment_sum) `)`)?
    (`segment_lse` `(` $segment_lse^ `:` type($segment_lse) `)`)?
    (`sinks` `(` $sinks^ `:` type($sinks) `)`)?
    (`out_scale` `(` $out_scale^ `:` type($out_scale) `)`)?
    `out` `(` $out `:` type($out) `)`
    attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    bool isLseForm() { return getSegmentLse() != nullptr; }
  }];
}

#endif // ATTN_IR_ATTNOPS_TD

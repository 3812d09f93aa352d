//===- AttnOps.cpp - attn dialect operations --------------------*- C++ -*-===//
//
// Verifiers: every rule names the operand or attribute it concerns. The rules
// follow the seeds' layouts (docs/semantics.md).
//
//===----------------------------------------------------------------------===//

#include "attn/IR/AttnOps.h"
#include "OperandChecks.h"
#include "attn/IR/AttnLimits.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::detail;
using namespace mlir::attn::limits;

#define GET_OP_CLASSES
#include "attn/IR/AttnInterfaces.cpp.inc"
#include "attn/IR/AttnOps.cpp.inc"

namespace {
// Dimension names of each layout, used by the diagnostics.
constexpr StringRef kQDims[] = {"tokens", "q_heads", "head_dim"};
constexpr StringRef kKvDims[] = {"tokens", "kv_heads", "head_dim"};
constexpr StringRef kSplitKCacheDims[] = {"num_blocks", "kv_heads",
                                          "head_dim/x", "block_size", "x"};
constexpr StringRef kSplitVCacheDims[] = {"num_blocks", "kv_heads", "head_dim",
                                          "block_size"};
constexpr StringRef kNhdCacheDims[] = {"num_blocks", "block_size", "kv_heads",
                                       "head_dim"};
constexpr StringRef kBlockTableDims[] = {"batch", "max_blocks"};
constexpr StringRef kOffsetsDims[] = {"batch+1"};
constexpr StringRef kPerSeqDims[] = {"batch"};
constexpr StringRef kPartialDims[] = {"tokens", "heads", "segments",
                                      "head_dim"};
constexpr StringRef kStatsDims[] = {"tokens", "heads", "segments"};
constexpr StringRef kMergedDims[] = {"tokens", "heads", "head_dim"};
constexpr StringRef kLseDims[] = {"tokens", "q_heads"};
// attn.unified's partials by sequence (sequence_partials).
constexpr StringRef kSeqPartialDims[] = {"batch*max_query_len", "heads",
                                         "segments", "head_dim"};
constexpr StringRef kSeqStatsDims[] = {"batch*max_query_len", "heads",
                                       "segments"};
constexpr StringRef kSeqCounterDims[] = {"batch*max_query_len", "q_heads"};
constexpr StringRef kBiasDims[] = {"batch", "q_heads", "max_seqlen_q",
                                   "max_seqlen_k"};
constexpr StringRef kCrowDims[] = {"layout_heads", "rows+1"};
constexpr StringRef kColDims[] = {"layout_heads", "nnz"};

MemRefType memrefTypeOf(Value v) { return cast<MemRefType>(v.getType()); }

/// q [tokens, q_heads, head_dim] against k/v [tokens, kv_heads, head_dim]:
/// static heads and head dim, GQA divisibility, matching head dims.
LogicalResult verifyHeads(OperandChecker &c, MemRefType q, StringRef qName,
                          MemRefType kv, StringRef kvName,
                          ArrayRef<StringRef> kvDims, unsigned kvHeadDim,
                          unsigned kvDDim) {
  if (failed(c.staticDim(q, qName, kQDims, 1, kMaxHeads)) ||
      failed(c.staticDim(q, qName, kQDims, 2, kMaxHeadDim)) ||
      failed(c.staticDim(kv, kvName, kvDims, kvHeadDim, kMaxHeads)) ||
      failed(c.staticDim(kv, kvName, kvDims, kvDDim, kMaxHeadDim)))
    return failure();
  int64_t qHeads = q.getDimSize(1), kvHeads = kv.getDimSize(kvHeadDim);
  if (qHeads % kvHeads != 0)
    return c.error(kvName) << "has " << kvHeads
                           << " KV heads, which must divide the " << qHeads
                           << " query heads of '" << qName << "' (GQA)";
  return c.sameDim(q, qName, kQDims, 2, kv, kvName, kvDims, kvDDim);
}

/// Index operands: block tables, offsets and lengths are i32.
LogicalResult verifyOffsets(OperandChecker &c, Value offsets,
                            StringRef offsetsName, Value perSeq,
                            StringRef perSeqName) {
  MemRefType o = c.memref(offsets, offsetsName, kOffsetsDims, kI32);
  MemRefType s = c.memref(perSeq, perSeqName, kPerSeqDims, kI32);
  if (!o || !s)
    return failure();
  if (!o.isDynamicDim(0) && !s.isDynamicDim(0) &&
      o.getDimSize(0) != s.getDimSize(0) + 1)
    return c.error(offsetsName)
           << "must have one more entry than '" << perSeqName << "' (got "
           << o.getDimSize(0) << " and " << s.getDimSize(0) << ")";
  return success();
}

LogicalResult verifyWindow(Operation *op, IntegerAttr window) {
  if (window && window.getInt() <= 0)
    return op->emitOpError() << "attribute 'sliding_window' must be positive "
                                "(omit it to disable the window), got "
                             << window.getInt();
  if (window && window.getInt() > kMaxSlidingWindow)
    return op->emitOpError()
           << "attribute 'sliding_window' must be at most " << kMaxSlidingWindow
           << " (positions are 32-bit; omit it to disable the window), got "
           << window.getInt();
  return success();
}

LogicalResult verifyAlibi(OperandChecker &c, Operation *op, Value slopes,
                          std::optional<AlibiForm> form, int64_t qHeads) {
  if (form && !slopes)
    return op->emitOpError()
           << "attribute 'alibi_form' requires operand 'alibi_slopes'";
  return slopes ? c.perHead(slopes, "alibi_slopes", qHeads) : success();
}

/// An optional fp8 scale operand must be present exactly when its tensor is
/// fp8.
LogicalResult verifyFp8Scale(OperandChecker &c, Value scale,
                             StringRef scaleName, bool tensorIsFp8,
                             StringRef tensorName) {
  if (tensorIsFp8 && !scale)
    return c.error(tensorName)
           << "is fp8 and requires operand '" << scaleName << "'";
  if (!tensorIsFp8 && scale)
    return c.error(scaleName)
           << "is only valid when '" << tensorName << "' is fp8";
  return scale ? c.scale(scale, scaleName) : success();
}

/// `out_scale` is required for an fp8 `out`; vLLM's kernels also take it with
/// a 16/32-bit `out` (quantize to the fp8 range, store in out's type).
LogicalResult verifyOutScale(OperandChecker &c, Value outScale, bool outFp8,
                             StringRef name = "out") {
  if (outFp8 && !outScale)
    return c.error(name) << "is fp8 and requires operand 'out_scale'";
  return outScale ? c.scale(outScale, "out_scale") : success();
}

/// The final output: the query's element type (or `allowedPlain` types when
/// the query is fp8), or fp8 with `out_scale`.
LogicalResult verifyOutput(OperandChecker &c, Value out, MemRefType q,
                           StringRef qName, ArrayRef<StringRef> dims,
                           Value outScale, StringRef name = "out") {
  MemRefType o = c.memref(out, name, dims, kHalfOrFloat | kFp8);
  if (!o || failed(c.sameShape(q, qName, o, name, dims)))
    return failure();
  bool outFp8 = isFp8(o.getElementType());
  if (!outFp8 && !isFp8(q.getElementType()) &&
      failed(c.sameElem(q, qName, o, name)))
    return failure();
  return verifyOutScale(c, outScale, outFp8, name);
}
/// The optional row log-sum-exp: f32 [tokens, q_heads] of the query.
LogicalResult verifyLse(OperandChecker &c, Value lse, MemRefType q) {
  if (!lse)
    return success();
  MemRefType l = c.memref(lse, "lse", kLseDims, kF32);
  if (!l)
    return failure();
  for (unsigned d = 0; d < 2; ++d)
    if (failed(c.sameDim(q, "q", kQDims, d, l, "lse", kLseDims, d)))
      return failure();
  return success();
}

/// Dense varlen q/k/v ([tokens, heads, D], one element type, GQA heads) and
/// their two offset arrays (flash, blocksparse).
LogicalResult verifyVarlenQkv(OperandChecker &c, Value qv, Value kv, Value vv,
                              Value cqv, Value ckv, unsigned elems,
                              bool sameElems = true) {
  MemRefType q = c.memref(qv, "q", kQDims, elems);
  MemRefType k = c.memref(kv, "k", kKvDims, elems);
  MemRefType v = c.memref(vv, "v", kKvDims, elems);
  if (!q || !k || !v)
    return failure();
  if ((sameElems && (failed(c.sameElem(q, "q", k, "k")) ||
                     failed(c.sameElem(q, "q", v, "v")))) ||
      failed(verifyHeads(c, q, "q", k, "k", kKvDims, 1, 2)) ||
      failed(c.sameShape(k, "k", v, "v", kKvDims)))
    return failure();
  MemRefType cq = c.memref(cqv, "cu_seqlens_q", kOffsetsDims, kI32);
  MemRefType ck = c.memref(ckv, "cu_seqlens_k", kOffsetsDims, kI32);
  if (!cq || !ck)
    return failure();
  return c.sameDim(cq, "cu_seqlens_q", kOffsetsDims, 0, ck, "cu_seqlens_k",
                   kOffsetsDims, 0);
}

/// The packed heads must share a KV head (ScheduleAttr::verify checks the
/// ranges).
LogicalResult verifySchedule(Operation *op, ScheduleAttr schedule,
                             int64_t group) {
  if (!schedule)
    return success();
  if (group % schedule.getHeadsPerProgram() != 0)
    return op->emitOpError()
           << "attribute 'schedule' packs " << schedule.getHeadsPerProgram()
           << " heads per program, which must divide the " << group
           << " query heads per KV head";
  return success();
}

int64_t groupOf(Value q, Value kv, unsigned kvHeadDim) {
  return memrefTypeOf(q).getDimSize(1) / memrefTypeOf(kv).getDimSize(kvHeadDim);
}
/// Per-token-head scale caches (vLLM's kv_quant_mode 2, 3).
LogicalResult verifyTokenScales(UnifiedOp op, OperandChecker &c,
                                MemRefType kc) {
  static constexpr StringRef dims[] = {"num_blocks", "block_size", "kv_heads"};
  Value kScales = op.getKScaleCache(), vScales = op.getVScaleCache();
  if (!kScales || !vScales)
    return c.error(kScales ? "k_scale_cache" : "v_scale_cache")
           << "requires operand '"
           << (kScales ? "v_scale_cache" : "k_scale_cache")
           << "' (per-token-head scales come in pairs)";
  if (!isFp8(kc.getElementType()) && !kc.getElementType().isSignlessInteger(8))
    return c.error("k_cache") << "must hold i8 or fp8 values with "
                                 "per-token-head scale caches, got "
                              << kc.getElementType();
  for (auto [value, name] : {std::pair{kScales, "k_scale_cache"},
                             std::pair{vScales, "v_scale_cache"}}) {
    MemRefType t = c.memref(value, name, dims, kF32);
    if (!t)
      return failure();
    for (unsigned d = 0; d < 3; ++d)
      if (failed(c.sameDim(kc, "k_cache", kNhdCacheDims, d, t, name, dims, d)))
        return failure();
  }
  return success();
}

/// Tree bias, bidirectional ranges and R-SWA.
LogicalResult verifyMasksAndBias(UnifiedOp op, OperandChecker &c) {
  static constexpr StringRef qqDims[] = {"qq_rows", "qq_cols"};
  static constexpr StringRef rangeDims[] = {"batch", "ranges", "2"};
  auto seqs = cast<MemRefType>(op.getSequsedK().getType());
  if (Value bias = op.getQqBias();
      bias && !c.memref(bias, "qq_bias", qqDims, kHalfOrFloat))
    return failure();
  if (Value ranges = op.getMmPrefixRange()) {
    MemRefType r = c.memref(ranges, "mm_prefix_range", rangeDims, kI32);
    if (!r || failed(c.staticDim(r, "mm_prefix_range", rangeDims, 2, 2)) ||
        failed(c.dimEquals(r, "mm_prefix_range", rangeDims, 2, 2,
                           "a (start, end) pair")) ||
        failed(c.sameDim(seqs, "seqused_k", kPerSeqDims, 0, r,
                         "mm_prefix_range", rangeDims, 0)))
      return failure();
  } else if (op.getMmPrefixClampWindow()) {
    return op.emitOpError() << "attribute 'mm_prefix_clamp_window' requires "
                               "operand 'mm_prefix_range'";
  }
  Value prefixLens = op.getRswaPrefixLens();
  if (bool(prefixLens) != bool(op.getRswaWindowAttr()))
    return op.emitOpError()
           << "R-SWA needs both operand 'rswa_prefix_lens' and "
              "attribute 'rswa_window'";
  if (!prefixLens)
    return success();
  MemRefType p = c.memref(prefixLens, "rswa_prefix_lens", kPerSeqDims, kI32);
  if (!p || failed(c.sameDim(seqs, "seqused_k", kPerSeqDims, 0, p,
                             "rswa_prefix_lens", kPerSeqDims, 0)))
    return failure();
  int64_t window = op.getRswaWindowAttr().getInt();
  if (window < 1 || window > kMaxSlidingWindow)
    return op.emitOpError() << "attribute 'rswa_window' must be in [1, "
                            << kMaxSlidingWindow << "], got " << window;
  // vLLM leaves these combinations undefined (docs/semantics.md 3.2).
  if (op.getSlidingWindowAttr() || op.getMmPrefixRange())
    return c.error("rswa_prefix_lens")
           << "cannot be combined with "
           << (op.getSlidingWindowAttr() ? "attribute 'sliding_window'"
                                         : "operand 'mm_prefix_range'");
  return success();
}
} // namespace

//===----------------------------------------------------------------------===//
// PrefixPrefillOp
//===----------------------------------------------------------------------===//

int64_t PrefixPrefillOp::getHeadDim() {
  return memrefTypeOf(getQ()).getDimSize(2);
}
int64_t PrefixPrefillOp::getNumQueryHeads() {
  return memrefTypeOf(getQ()).getDimSize(1);
}
int64_t PrefixPrefillOp::getNumKvHeads() {
  return memrefTypeOf(getK()).getDimSize(1);
}
int64_t PrefixPrefillOp::getBlockSize() {
  return memrefTypeOf(getVCache()).getDimSize(3);
}
int64_t PrefixPrefillOp::getKeySplit() {
  return memrefTypeOf(getKCache()).getDimSize(4);
}

LogicalResult PrefixPrefillOp::verify() {
  if (failed(verifyOperandSegments(
          *this, getProperties().operandSegmentSizes,
          {"q", "k", "v", "k_cache", "v_cache", "block_table", "query_start",
           "seq_lens", "scale", "k_scale?", "v_scale?", "alibi_slopes?",
           "sinks?", "out_scale?", "out"})))
    return failure();
  OperandChecker c(*this);
  MemRefType q = c.memref(getQ(), "q", kQDims, kHalfOrFloat);
  MemRefType k = c.memref(getK(), "k", kKvDims, kHalfOrFloat);
  MemRefType v = c.memref(getV(), "v", kKvDims, kHalfOrFloat);
  if (!q || !k || !v)
    return failure();
  if (failed(c.sameElem(q, "q", k, "k")) ||
      failed(c.sameElem(q, "q", v, "v")) ||
      failed(verifyHeads(c, q, "q", k, "k", kKvDims, 1, 2)) ||
      failed(c.sameShape(k, "k", v, "v", kKvDims)) ||
      failed(c.sameDim(q, "q", kQDims, 0, k, "k", kKvDims, 0)))
    return failure();
  int64_t headDim = q.getDimSize(2), kvHeads = k.getDimSize(1);

  // vLLM's split key cache [blocks, kv_heads, D/x, block_size, x] and value
  // cache [blocks, kv_heads, D, block_size].
  MemRefType kc =
      c.memref(getKCache(), "k_cache", kSplitKCacheDims, kHalfOrFloat | kFp8);
  MemRefType vc =
      c.memref(getVCache(), "v_cache", kSplitVCacheDims, kHalfOrFloat | kFp8);
  if (!kc || !vc)
    return failure();
  if (failed(c.staticDim(kc, "k_cache", kSplitKCacheDims, 1, kMaxHeads)) ||
      failed(c.staticDim(kc, "k_cache", kSplitKCacheDims, 2, kMaxHeadDim)) ||
      failed(c.staticDim(kc, "k_cache", kSplitKCacheDims, 3, kMaxBlockSize)) ||
      failed(c.staticDim(kc, "k_cache", kSplitKCacheDims, 4, kMaxHeadDim)) ||
      failed(c.staticDim(vc, "v_cache", kSplitVCacheDims, 1, kMaxHeads)) ||
      failed(c.staticDim(vc, "v_cache", kSplitVCacheDims, 2, kMaxHeadDim)) ||
      failed(c.staticDim(vc, "v_cache", kSplitVCacheDims, 3, kMaxBlockSize)))
    return failure();
  if (failed(c.dimEquals(kc, "k_cache", kSplitKCacheDims, 1, kvHeads,
                         "the KV heads of 'k'")) ||
      failed(c.dimEquals(vc, "v_cache", kSplitVCacheDims, 1, kvHeads,
                         "the KV heads of 'k'")) ||
      failed(c.dimEquals(vc, "v_cache", kSplitVCacheDims, 2, headDim,
                         "the head dim of 'q'")) ||
      failed(c.sameDim(kc, "k_cache", kSplitKCacheDims, 3, vc, "v_cache",
                       kSplitVCacheDims, 3)) ||
      failed(c.sameDim(kc, "k_cache", kSplitKCacheDims, 0, vc, "v_cache",
                       kSplitVCacheDims, 0)))
    return failure();
  if (kc.getDimSize(2) * kc.getDimSize(4) != headDim)
    return c.error("k_cache")
           << "splits the head dim as " << kc.getDimSize(2) << " x "
           << kc.getDimSize(4) << ", which must equal the head dim " << headDim;
  if (failed(c.sameElem(kc, "k_cache", vc, "v_cache")))
    return failure();
  bool cacheFp8 = isFp8(kc.getElementType());
  if (!cacheFp8 && failed(c.sameElem(q, "q", kc, "k_cache")))
    return failure();
  if (failed(verifyFp8Scale(c, getKScale(), "k_scale", cacheFp8, "k_cache")) ||
      failed(verifyFp8Scale(c, getVScale(), "v_scale", cacheFp8, "v_cache")))
    return failure();

  if (!c.memref(getBlockTable(), "block_table", kBlockTableDims, kI32) ||
      failed(verifyOffsets(c, getQueryStart(), "query_start", getSeqLens(),
                           "seq_lens")))
    return failure();

  if (failed(verifyOutput(c, getOut(), q, "q", kQDims, getOutScale())) ||
      failed(verifyWindow(*this, getSlidingWindowAttr())) ||
      failed(verifyAlibi(c, *this, getAlibiSlopes(), getAlibiForm(),
                         q.getDimSize(1))) ||
      (getSinks() && failed(c.perHead(getSinks(), "sinks", q.getDimSize(1)))))
    return failure();
  // The seed's ALiBi kernel has no sink support; keep the two exclusive.
  if (getAlibiSlopes() && getSinks())
    return c.error("sinks") << "cannot be combined with 'alibi_slopes' in "
                               "prefix prefill (the ALiBi kernel has no sinks)";
  return verifySchedule(*this, getScheduleAttr(), groupOf(getQ(), getK(), 1));
}

//===----------------------------------------------------------------------===//
// UnifiedOp
//===----------------------------------------------------------------------===//

int64_t UnifiedOp::getHeadDim() { return memrefTypeOf(getQ()).getDimSize(2); }
int64_t UnifiedOp::getNumQueryHeads() {
  return memrefTypeOf(getQ()).getDimSize(1);
}
int64_t UnifiedOp::getNumKvHeads() {
  return memrefTypeOf(getKCache()).getDimSize(2);
}
int64_t UnifiedOp::getBlockSize() {
  return memrefTypeOf(getKCache()).getDimSize(1);
}

LogicalResult UnifiedOp::verify() {
  if (failed(verifyOperandSegments(*this, getProperties().operandSegmentSizes,
                                   {"q",
                                    "k_cache",
                                    "v_cache",
                                    "block_table",
                                    "cu_seqlens_q",
                                    "seqused_k",
                                    "scale",
                                    "softcap?",
                                    "q_descale?",
                                    "k_descale?",
                                    "v_descale?",
                                    "alibi_slopes?",
                                    "sinks?",
                                    "qq_bias?",
                                    "mm_prefix_range?",
                                    "rswa_prefix_lens?",
                                    "k_scale_cache?",
                                    "v_scale_cache?",
                                    "causal_flags?",
                                    "out_scale?",
                                    "out",
                                    "segment_max?",
                                    "segment_sum?",
                                    "lse?",
                                    "merged_out?",
                                    "merge_counters?"})))
    return failure();
  OperandChecker c(*this);
  // Per-token-head scale caches also admit i8 caches (kv_quant_mode 2).
  bool tokenScales = getKScaleCache() || getVScaleCache();
  unsigned cacheElems = kHalfOrFloat | kFp8 | (tokenScales ? kI8 : 0u);
  MemRefType q, kc, vc;
  if (!(q = c.memref(getQ(), "q", kQDims, kHalfOrFloat | kFp8)) ||
      !(kc = c.memref(getKCache(), "k_cache", kNhdCacheDims, cacheElems)) ||
      !(vc = c.memref(getVCache(), "v_cache", kNhdCacheDims, cacheElems)))
    return failure();
  if (failed(c.staticDim(kc, "k_cache", kNhdCacheDims, 1, kMaxBlockSize)) ||
      failed(verifyHeads(c, q, "q", kc, "k_cache", kNhdCacheDims, 2, 3)) ||
      failed(c.sameShape(kc, "k_cache", vc, "v_cache", kNhdCacheDims)) ||
      failed(c.sameElem(kc, "k_cache", vc, "v_cache")))
    return failure();

  bool qFp8 = isFp8(q.getElementType());
  bool cacheFp8 = isFp8(kc.getElementType());
  if (qFp8 && !cacheFp8)
    return c.error("q") << "is fp8, which requires an fp8 KV cache, got "
                        << kc.getElementType();
  if (tokenScales && qFp8)
    return c.error("q") << "must not be fp8 with per-token-head scale caches";
  if (tokenScales && failed(verifyTokenScales(*this, c, kc)))
    return failure();
  if (!cacheFp8 && !tokenScales && failed(c.sameElem(q, "q", kc, "k_cache")))
    return failure();
  int64_t kvHeads = kc.getDimSize(2);
  for (auto [value, name, fp8, tensor] :
       {std::tuple{getQDescale(), "q_descale", qFp8, "q"},
        std::tuple{getKDescale(), "k_descale", cacheFp8, "k_cache"},
        std::tuple{getVDescale(), "v_descale", cacheFp8, "v_cache"}}) {
    // Per-token-head scales replace the per-tensor descales of the caches.
    if (tokenScales && StringRef(name) != "q_descale") {
      if (value)
        return c.error(name) << "cannot be combined with per-token-head "
                                "scale caches";
      continue;
    }
    if (fp8 && !value)
      return c.error(tensor) << "is fp8 and requires operand '" << name << "'";
    if (!fp8 && value)
      return c.error(name) << "is only valid when '" << tensor << "' is fp8";
    if (value && failed(c.scaleOrPerSeqHead(value, name, kvHeads)))
      return failure();
    auto t = value ? dyn_cast<MemRefType>(value.getType()) : MemRefType();
    auto seqs = cast<MemRefType>(getSequsedK().getType());
    if (t && t.getRank() == 2 && !t.isDynamicDim(0) && seqs.getRank() == 1 &&
        !seqs.isDynamicDim(0) && t.getDimSize(0) != seqs.getDimSize(0))
      return c.error(name) << "has " << t.getDimSize(0)
                           << " rows, one per sequence of 'seqused_k' ("
                           << seqs.getDimSize(0) << ")";
  }

  if (!c.memref(getBlockTable(), "block_table", kBlockTableDims, kI32) ||
      failed(verifyOffsets(c, getCuSeqlensQ(), "cu_seqlens_q", getSequsedK(),
                           "seqused_k")) ||
      failed(verifyWindow(*this, getSlidingWindowAttr())) ||
      failed(verifyAlibi(c, *this, getAlibiSlopes(), getAlibiForm(),
                         q.getDimSize(1))) ||
      (getSinks() && failed(c.perHead(getSinks(), "sinks", q.getDimSize(1)))))
    return failure();

  if (failed(verifySchedule(*this, getScheduleAttr(),
                            groupOf(getQ(), getKCache(), 2))) ||
      failed(verifyMasksAndBias(*this, c)) || failed(verifyCausality()) ||
      failed(verifyQueryLenRange()))
    return failure();
  if (!isSplitKv()) {
    if (getSequencePartials())
      return emitOpError() << "attribute 'sequence_partials' requires the "
                              "split-KV form ('segment_max', 'segment_sum')";
    if (getSegmentSum())
      return c.error("segment_sum")
             << "is only valid with 'segment_max' (split-KV)";
    for (auto [value, name] : {std::pair{getMergedOut(), "merged_out"},
                               std::pair{getMergeCounters(), "merge_counters"}})
      if (value)
        return c.error(name) << "is only valid in the split-KV form "
                                "('segment_max'), whose segments it merges";
    if (failed(verifyLse(c, getLse(), q)))
      return failure();
    return verifyOutput(c, getOut(), q, "q", kQDims, getOutScale());
  }
  if (getLse() && !fusesMerge())
    return c.error("lse") << "is not valid in the split-KV form without "
                             "'merged_out'; its segment statistics go to "
                             "attn.merge_states";
  // Partials by sequence: batch * max_query_len rows, not one a token.
  bool bySequence = getSequencePartials();
  if (bySequence && !getMaxQueryLenAttr())
    return emitOpError() << "attribute 'sequence_partials' requires "
                            "'max_query_len' (the partial rows a sequence "
                            "holds)";

  // Split-KV form: partial accumulators and statistics, all f32. Without
  // the attribute, the segment count is out's dim 2 at run time.
  std::optional<int64_t> segments;
  if (IntegerAttr n = getNumSegmentsAttr()) {
    segments = n.getInt();
    if (*segments < 1 || *segments > kMaxSegments)
      return emitOpError() << "attribute 'num_segments' must be in [1, "
                           << kMaxSegments << "], got " << *segments;
  }
  if (!getSegmentMax() || !getSegmentSum())
    return emitOpError() << "split-KV form ('num_segments') requires operands "
                            "'segment_max' and 'segment_sum'";
  if (bool(getMergedOut()) != bool(getMergeCounters()))
    return getMergedOut()
               ? c.error("merged_out")
                     << "requires operand 'merge_counters' (the arrival "
                        "counters of the fused merge)"
               : c.error("merge_counters")
                     << "is only valid with operand 'merged_out'";
  if (getOutScale() && !fusesMerge())
    return c.error("out_scale")
           << "is not valid in the split-KV form without 'merged_out'; the "
              "fp8 output belongs to the merge";
  if (getSinks() && !fusesMerge())
    return c.error("sinks")
           << "is not valid in the split-KV form without 'merged_out'; "
              "sinks are applied once, by the merge";
  if (fusesMerge()) {
    if (failed(verifyOutput(c, getMergedOut(), q, "q", kQDims, getOutScale(),
                            "merged_out")))
      return failure();
    // (The fused merge's rows: their log-sum-exp over every segment.)
    if (failed(verifyLse(c, getLse(), q)))
      return failure();
  }
  ArrayRef<StringRef> partialDims = bySequence ? kSeqPartialDims : kPartialDims;
  ArrayRef<StringRef> statsDims = bySequence ? kSeqStatsDims : kStatsDims;
  MemRefType o = c.memref(getOut(), "out", partialDims, kF32);
  if (!o)
    return failure();
  if (fusesMerge()) {
    // The counters are indexed as the partials are.
    ArrayRef<StringRef> counterDims = bySequence ? kSeqCounterDims : kLseDims;
    MemRefType counters =
        c.memref(getMergeCounters(), "merge_counters", counterDims, kI32);
    if (!counters)
      return failure();
    for (unsigned d = 0; d < 2; ++d)
      if (failed(bySequence && d == 0
                     ? c.sameDim(o, "out", partialDims, 0, counters,
                                 "merge_counters", counterDims, 0)
                     : c.sameDim(q, "q", kQDims, d, counters, "merge_counters",
                                 counterDims, d)))
        return failure();
  }
  auto seqs = cast<MemRefType>(getSequsedK().getType());
  if (bySequence && seqs.getRank() == 1 && !seqs.isDynamicDim(0) &&
      !o.isDynamicDim(0)) {
    int64_t rows = seqs.getDimSize(0) * getMaxQueryLenAttr().getInt();
    if (o.getDimSize(0) != rows)
      return c.error("out")
             << "has " << o.getDimSize(0)
             << " partial rows; 'sequence_partials' needs " << rows << " ("
             << seqs.getDimSize(0) << " sequences x max_query_len "
             << getMaxQueryLenAttr().getInt() << ")";
  }
  if ((!bySequence &&
       failed(c.sameDim(q, "q", kQDims, 0, o, "out", partialDims, 0))) ||
      failed(c.sameDim(q, "q", kQDims, 1, o, "out", partialDims, 1)) ||
      (segments && failed(c.dimEquals(o, "out", partialDims, 2, *segments,
                                      "'num_segments'"))) ||
      failed(c.sameDim(q, "q", kQDims, 2, o, "out", partialDims, 3)))
    return failure();
  for (auto [value, name] : {std::pair{getSegmentMax(), "segment_max"},
                             std::pair{getSegmentSum(), "segment_sum"}}) {
    MemRefType s = c.memref(value, name, statsDims, kF32);
    if (!s)
      return failure();
    for (unsigned d = 0; d < 3; ++d)
      if (failed(c.sameDim(o, "out", partialDims, d, s, name, statsDims, d)))
        return failure();
  }
  return success();
}

LogicalResult UnifiedOp::verifyCausality() {
  Value flags = getCausalFlags();
  if (flags && getBidirectional())
    return emitOpError() << "operand 'causal_flags' and attribute "
                            "'bidirectional' are exclusive";
  if (flags) {
    OperandChecker c(*this);
    MemRefType t = c.memref(flags, "causal_flags", kPerSeqDims, kI8);
    auto seqs = cast<MemRefType>(getSequsedK().getType());
    if (!t || failed(c.sameDim(seqs, "seqused_k", kPerSeqDims, 0, t,
                               "causal_flags", kPerSeqDims, 0)))
      return failure();
  }
  IntegerAttr lookback = getChunkLookbackAttr();
  if (!lookback)
    return success();
  IntegerAttr window = getSlidingWindowAttr();
  if (!window)
    return emitOpError() << "attribute 'chunk_lookback' requires attribute "
                            "'sliding_window' (the chunks are cut from it)";
  int64_t l = lookback.getInt();
  if (l < 0 || l >= window.getInt())
    return emitOpError() << "attribute 'chunk_lookback' must be in [0, "
                            "sliding_window), so that chunks of "
                            "sliding_window / (chunk_lookback + 1) keys are "
                            "not empty; got "
                         << l;
  if (getRswaPrefixLens())
    return emitOpError() << "attribute 'chunk_lookback' cannot be combined "
                            "with R-SWA";
  return success();
}

LogicalResult UnifiedOp::verifyQueryLenRange() {
  IntegerAttr lo = getMinQueryLenAttr(), hi = getMaxQueryLenAttr();
  for (auto [attr, name] :
       {std::pair{lo, "min_query_len"}, std::pair{hi, "max_query_len"}})
    if (attr && attr.getInt() < 1)
      return emitOpError() << "attribute '" << name
                           << "' must be at least 1 (a query count), got "
                           << attr.getInt();
  if (lo && hi && lo.getInt() > hi.getInt())
    return emitOpError() << "attribute 'min_query_len' (" << lo.getInt()
                         << ") must not exceed 'max_query_len' (" << hi.getInt()
                         << "): no sequence would be computed";
  return success();
}

//===----------------------------------------------------------------------===//
// FlashOp
//===----------------------------------------------------------------------===//

int64_t FlashOp::getHeadDim() { return memrefTypeOf(getQ()).getDimSize(2); }
int64_t FlashOp::getNumQueryHeads() {
  return memrefTypeOf(getQ()).getDimSize(1);
}
int64_t FlashOp::getNumKvHeads() { return memrefTypeOf(getK()).getDimSize(1); }

LogicalResult FlashOp::verify() {
  if (failed(verifyOperandSegments(
          *this, getProperties().operandSegmentSizes,
          {"q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "scale", "bias?",
           "dropout_p?", "philox_seed?", "philox_offset?", "q_scale?",
           "k_scale?", "v_scale?", "p_scale?", "out_scale?", "out", "lse?"})))
    return failure();
  OperandChecker c(*this);
  TypeAttr quantizeTo = getQuantizeToAttr();
  if (failed(verifyVarlenQkv(c, getQ(), getK(), getV(), getCuSeqlensQ(),
                             getCuSeqlensK(), kHalfOrFloat | kFp8,
                             /*sameElems=*/!quantizeTo)))
    return failure();
  auto q = memrefTypeOf(getQ());
  if (quantizeTo) {
    // q, k and v are each either of the quantized type or quantized on load.
    Type t = quantizeTo.getValue();
    if (!isFp8(t))
      return emitOpError() << "attribute 'quantize_to' must be an fp8 type, "
                              "got "
                           << t;
    for (auto [value, name] : {std::pair{getQ(), "q"}, std::pair{getK(), "k"},
                               std::pair{getV(), "v"}}) {
      Type elem = memrefTypeOf(value).getElementType();
      if (isFp8(elem) && elem != t)
        return c.error(name)
               << "must be " << t << " or a float type quantized on load, got "
               << elem;
    }
  }

  if (Value bias = getBias()) {
    MemRefType b = c.memref(bias, "bias", kBiasDims, kHalfOrFloat);
    if (!b || failed(c.dimEquals(b, "bias", kBiasDims, 1, q.getDimSize(1),
                                 "the query heads of 'q'")))
      return failure();
  }

  bool hasP = getDropoutP() != nullptr, hasSeed = getPhiloxSeed() != nullptr,
       hasOffset = getPhiloxOffset() != nullptr;
  if (hasP != hasSeed || hasP != hasOffset)
    return emitOpError() << "dropout needs all of 'dropout_p', 'philox_seed' "
                            "and 'philox_offset'";

  // Quantized on load: every scale is needed, as for fp8 inputs.
  if (quantizeTo)
    for (auto [value, name] :
         {std::pair{getQScale(), "q_scale"}, std::pair{getKScale(), "k_scale"},
          std::pair{getVScale(), "v_scale"}, std::pair{getPScale(), "p_scale"}})
      if (!value)
        return emitOpError()
               << "attribute 'quantize_to' requires operand '" << name << "'";
  bool fp8 = quantizeTo || isFp8(q.getElementType());
  if (failed(verifyFp8Scale(c, getQScale(), "q_scale", fp8, "q")) ||
      failed(verifyFp8Scale(c, getKScale(), "k_scale", fp8, "k")) ||
      failed(verifyFp8Scale(c, getVScale(), "v_scale", fp8, "v")) ||
      failed(verifyFp8Scale(c, getPScale(), "p_scale", fp8, "v")) ||
      failed(
          verifySchedule(*this, getScheduleAttr(), groupOf(getQ(), getK(), 1))))
    return failure();
  if (failed(verifyLse(c, getLse(), q)))
    return failure();
  // Quantized on load, the output follows the rules of an fp8 query.
  return verifyOutput(
      c, getOut(),
      quantizeTo ? MemRefType::get(q.getShape(), quantizeTo.getValue()) : q,
      "q", kQDims, getOutScale());
}

//===----------------------------------------------------------------------===//
// BlockSparseOp
//===----------------------------------------------------------------------===//

int64_t BlockSparseOp::getHeadDim() {
  return memrefTypeOf(getQ()).getDimSize(2);
}
int64_t BlockSparseOp::getNumQueryHeads() {
  return memrefTypeOf(getQ()).getDimSize(1);
}
int64_t BlockSparseOp::getNumKvHeads() {
  return memrefTypeOf(getK()).getDimSize(1);
}
bool BlockSparseOp::hasPerHeadLayout() {
  return memrefTypeOf(getCrow()).getDimSize(0) != 1;
}

LogicalResult BlockSparseOp::verify() {
  OperandChecker c(*this);
  if (failed(verifyVarlenQkv(c, getQ(), getK(), getV(), getCuSeqlensQ(),
                             getCuSeqlensK(), kHalfOrFloat)))
    return failure();
  auto q = memrefTypeOf(getQ());

  MemRefType crow = c.memref(getCrow(), "crow", kCrowDims, kI32);
  MemRefType col = c.memref(getCol(), "col", kColDims, kI32);
  if (!crow || !col ||
      failed(c.staticDim(crow, "crow", kCrowDims, 0, kMaxHeads)) ||
      failed(c.sameDim(crow, "crow", kCrowDims, 0, col, "col", kColDims, 0)))
    return failure();
  int64_t layoutHeads = crow.getDimSize(0), qHeads = q.getDimSize(1);
  if (layoutHeads != 1 && layoutHeads != qHeads)
    return c.error("crow") << "dimension 0 (layout_heads = " << layoutHeads
                           << ") must be 1 (a shared layout) or the " << qHeads
                           << " query heads";
  if (!crow.isDynamicDim(1) && crow.getDimSize(1) < 2)
    return c.error("crow") << "must have at least one row (rows+1 >= 2)";

  // I64Attr getters return unsigned values; read the signed integer.
  for (IntegerAttr size : {getBlockSizeAttr(), getQBlockSizeAttr()}) {
    if (!size || (size.getInt() > 0 && size.getInt() <= kMaxSparseBlock))
      continue;
    return emitOpError() << "attribute '"
                         << (size == getBlockSizeAttr() ? "block_size"
                                                        : "q_block_size")
                         << "' must be in [1, " << kMaxSparseBlock << "], got "
                         << size.getInt();
  }

  MemRefType o = c.memref(getOut(), "out", kQDims, kHalfOrFloat);
  if (!o || failed(c.sameElem(q, "q", o, "out")) ||
      failed(c.sameShape(q, "q", o, "out", kQDims)) ||
      failed(
          verifySchedule(*this, getScheduleAttr(), groupOf(getQ(), getK(), 1))))
    return failure();
  // A program walks one CSR row, or the union of two (a query tile of two
  // whole layout rows): its query tile must not straddle layout rows
  // otherwise, and heads with different layouts cannot share a program.
  if (ScheduleAttr schedule = getScheduleAttr()) {
    if (getQueryBlockSize() % schedule.getBlockQ() != 0 &&
        schedule.getBlockQ() != 2 * getQueryBlockSize())
      return emitOpError() << "attribute 'schedule' block_q = "
                           << schedule.getBlockQ()
                           << " must divide the query block size "
                           << getQueryBlockSize() << " or be twice it";
    if (layoutHeads != 1 && schedule.getHeadsPerProgram() != 1)
      return emitOpError() << "attribute 'schedule' must use "
                              "heads_per_program = 1 with a per-head layout";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// MergeStatesOp
//===----------------------------------------------------------------------===//

LogicalResult MergeStatesOp::verify() {
  if (failed(verifyOperandSegments(*this, getProperties().operandSegmentSizes,
                                   {"partial", "segment_max?", "segment_sum?",
                                    "segment_lse?", "sinks?", "out_scale?",
                                    "out"})))
    return failure();
  OperandChecker c(*this);
  // Normalized partials (the lse form: flash/unified outputs, which context
  // parallelism exchanges in their own precision) may be 16-bit; the
  // max/sum form's unnormalized accumulators stay f32.
  MemRefType p = c.memref(getPartial(), "partial", kPartialDims,
                          getSegmentLse() ? kHalfOrFloat : kF32);
  if (!p || failed(c.staticDim(p, "partial", kPartialDims, 3, kMaxHeadDim)))
    return failure();

  bool maxSum = getSegmentMax() || getSegmentSum();
  if (maxSum && getSegmentLse())
    return emitOpError() << "takes either 'segment_max' and 'segment_sum' or "
                            "'segment_lse', not both";
  if (!getSegmentLse() && (!getSegmentMax() || !getSegmentSum()))
    return emitOpError() << "requires 'segment_max' and 'segment_sum' (or "
                            "'segment_lse')";
  for (Value stats : {getSegmentMax(), getSegmentSum(), getSegmentLse()}) {
    if (!stats)
      continue;
    StringRef name = stats == getSegmentLse()   ? "segment_lse"
                     : stats == getSegmentMax() ? "segment_max"
                                                : "segment_sum";
    MemRefType s = c.memref(stats, name, kStatsDims, kF32);
    if (!s)
      return failure();
    for (unsigned d = 0; d < 3; ++d)
      if (failed(
              c.sameDim(p, "partial", kPartialDims, d, s, name, kStatsDims, d)))
        return failure();
  }

  MemRefType o = c.memref(getOut(), "out", kMergedDims, kHalfOrFloat | kFp8);
  if (!o ||
      failed(
          c.sameDim(p, "partial", kPartialDims, 0, o, "out", kMergedDims, 0)) ||
      failed(
          c.sameDim(p, "partial", kPartialDims, 1, o, "out", kMergedDims, 1)) ||
      failed(
          c.sameDim(p, "partial", kPartialDims, 3, o, "out", kMergedDims, 2)) ||
      failed(verifyOutScale(c, getOutScale(), isFp8(o.getElementType()))))
    return failure();
  if (Value sinks = getSinks()) {
    if (failed(c.staticDim(p, "partial", kPartialDims, 1, kMaxHeads)) ||
        failed(c.perHead(sinks, "sinks", p.getDimSize(1))))
      return failure();
  }
  return success();
}

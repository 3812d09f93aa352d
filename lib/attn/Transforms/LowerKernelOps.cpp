//===- LowerKernelOps.cpp - attn kernel ops -> tiled loops ------*- C++ -*-===//
//
// Each kernel op becomes an scf.parallel grid of programs (sequence x query
// tile x head group [x segment]) whose bodies TiledAttentionBuilder emits.
// The patterns here only say which rows a program owns and where its keys
// come from: the paged split-x cache and the new tokens (prefix prefill),
// the paged NHD cache and its segments (unified), a dense varlen range
// (flash) and the CSR block list (blocksparse).
//
//===----------------------------------------------------------------------===//

#include "Schedule.h"
#include "TiledAttention.h"
#include "attn/IR/AttnOps.h"
#include "attn/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::attn;

namespace {

bool isFp8Type(Type t) { return isa<Float8E4M3FNType, Float8E5M2Type>(t); }
Type elemOf(Value v) { return cast<MemRefType>(v.getType()).getElementType(); }

/// The largest number of query tiles any sequence needs; `offsets` has
/// batch + 1 entries.
Value maxTiles(LoopEmitter &e, Value offsets, Value batch, int64_t blockQ) {
  return e.reduce(e.idx(0), batch, e.idx(0), [&](Value b, Value best) {
    Value len = e.sub(e.loadIndex(offsets, {e.add(b, e.idx(1))}),
                      e.loadIndex(offsets, {b}));
    return e.max(best, e.ceilDiv(len, e.idx(blockQ)));
  });
}

/// Sequence `b`'s rows [start, start + len) of a varlen offsets array.
struct SeqRange {
  Value start, len;
};
SeqRange seqRange(LoopEmitter &e, Value offsets, Value b) {
  Value start = e.loadIndex(offsets, {b});
  return {start, e.sub(e.loadIndex(offsets, {e.add(b, e.idx(1))}), start)};
}

/// scf.parallel over [0, ub) for each bound.
void grid(LoopEmitter &e, ArrayRef<Value> ubs,
          llvm::function_ref<void(ValueRange)> body) {
  ImplicitLocOpBuilder &b = e.builder();
  SmallVector<Value> lbs(ubs.size(), e.idx(0)), steps(ubs.size(), e.idx(1));
  auto par = scf::ParallelOp::create(b, lbs, ubs, steps);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(par.getBody()->getTerminator());
  body(par.getInductionVars());
}

/// Program rows shared by the varlen ops: tile `t` of a sequence whose
/// queries start at row `qStart`, with positions offset by `posShift`.
ProgramRows tileRows(LoopEmitter &e, const TileShape &shape, Value b,
                     Value t, Value group, Value qStart, Value lenQ,
                     Value lenK, Value posShift) {
  ProgramRows rows;
  Value first = e.mul(t, e.idx(shape.blockQ));
  rows.qTokBase = e.add(qStart, first);
  rows.numTokens = e.min(e.idx(shape.blockQ), e.sub(lenQ, first));
  rows.qposBase = e.add(posShift, first);
  rows.seqRowBase = first;
  rows.headBase = e.mul(group, e.idx(shape.pack));
  rows.ctx = posShift;
  rows.batch = b;
  rows.lenQ = lenQ;
  rows.lenK = lenK;
  return rows;
}

TileShape shapeOf(Operation *op, int64_t headDim) {
  ScheduleAttr s = scheduleOrDefault(op);
  return TileShape{s.getBlockQ(), s.getBlockN(), s.getHeadsPerProgram(),
                   headDim};
}

Value scaleOrNull(LoopEmitter &e, Value memref) {
  return memref ? e.loadScalar(memref) : Value();
}

/// Loader of a dense [tokens, kv_heads, D] pair starting at row `base`.
KeyLoader denseLoader(Value k, Value v, Value base, Value kvHead,
                      int64_t headDim, Value kScale, Value vScale) {
  return [=](LoopEmitter &e, Value key, Value slot, Value kt, Value vt) {
    Value row = e.add(base, key);
    e.forLoop(0, headDim, [&](Value d) {
      e.store(e.load32(k, {row, kvHead, d}, kScale), kt, {slot, d});
      e.store(e.load32(v, {row, kvHead, d}, vScale), vt, {slot, d});
    });
  };
}

/// The grid of the dense varlen ops (flash, blocksparse): programs over
/// (sequence, query tile, head group) whose keys are rows of k/v, with query
/// i at the bottom-right aligned position i + Lk - Lq. `refineWalk` may
/// restrict a program's walk (blocksparse's CSR blocks).
void emitDenseVarlenGrid(
    LoopEmitter &e, const TileShape &shape, int64_t numQueryHeads,
    int64_t group, const AttentionFeatures &f, const AttentionOutput &out,
    Value q, Value k, Value v, Value cuQ, Value cuK, Value qScale,
    Value kScale, Value vScale,
    llvm::function_ref<void(LoopEmitter &, const ProgramRows &, KvWalk &)>
        refineWalk) {
  Value batch =
      e.sub(memref::DimOp::create(e.builder(), cuQ, 0), e.idx(1));
  Value tiles = maxTiles(e, cuQ, batch, shape.blockQ);
  Value groups = e.idx(numQueryHeads / shape.pack);
  grid(e, {batch, tiles, groups}, [&](ValueRange iv) {
    Value bIdx = iv[0], t = iv[1], g = iv[2];
    SeqRange qRange = seqRange(e, cuQ, bIdx), kRange = seqRange(e, cuK, bIdx);
    Value lenQ = qRange.len, lenK = kRange.len;
    e.ifThen(e.lt(e.mul(t, e.idx(shape.blockQ)), lenQ), [&] {
      ProgramRows rows = tileRows(e, shape, bIdx, t, g, qRange.start, lenQ,
                                  lenK, e.sub(lenK, lenQ));
      rows.qScale = qScale;
      Value kvHead = e.divU(rows.headBase, e.idx(group));
      TiledAttentionBuilder builder(e, shape, f, out, q);
      auto [lo, hi] = builder.visibleKeyRange(rows);
      KvWalk walk;
      walk.lo = lo;
      walk.hi = e.min(hi, lenK);
      walk.load = denseLoader(k, v, kRange.start, kvHead, shape.headDim,
                              kScale, vScale);
      refineWalk(e, rows, walk);
      builder.emitProgram(rows, {walk});
    });
  });
}

//===----------------------------------------------------------------------===//
// attn.prefix_prefill
//===----------------------------------------------------------------------===//

struct LowerPrefixPrefill : OpRewritePattern<PrefixPrefillOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PrefixPrefillOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    LoopEmitter e(b);
    TileShape shape = shapeOf(op, op.getHeadDim());
    int64_t group = op.getNumQueryHeads() / op.getNumKvHeads();
    int64_t blockSize = op.getBlockSize(), split = op.getKeySplit();

    AttentionFeatures f;
    f.scale = op.getScale();
    f.alibiSlopes = op.getAlibiSlopes();
    f.alibiForm = op.getAlibiFormOrDefault();
    f.sinks = op.getSinks();
    f.window = op.getSlidingWindowAttr()
                   ? std::optional<int64_t>(op.getSlidingWindowAttr().getInt())
                   : std::nullopt;
    f.causal = true;
    AttentionOutput out{op.getOut(), op.getOutScale(), {}, {}};
    Value kScale = scaleOrNull(e, op.getKScale());
    Value vScale = scaleOrNull(e, op.getVScale());

    Value batch = memref::DimOp::create(b, op.getSeqLens(), 0);
    Value tiles = maxTiles(e, op.getQueryStart(), batch, shape.blockQ);
    Value groups = e.idx(op.getNumQueryHeads() / shape.pack);
    grid(e, {batch, tiles, groups}, [&](ValueRange iv) {
      Value bIdx = iv[0], t = iv[1], g = iv[2];
      SeqRange qRange = seqRange(e, op.getQueryStart(), bIdx);
      Value qStart = qRange.start, lenQ = qRange.len;
      Value lenK = e.loadIndex(op.getSeqLens(), {bIdx});
      Value ctx = e.sub(lenK, lenQ);
      Value run = e.lt(e.mul(t, e.idx(shape.blockQ)), lenQ);
      if (op.getSkipDecode())
        run = e.andI(run, e.cmp(arith::CmpIPredicate::ne, lenQ, e.idx(1)));
      e.ifThen(run, [&] {
        ProgramRows rows =
            tileRows(e, shape, bIdx, t, g, qStart, lenQ, lenK, ctx);
        Value kvHead = e.divU(rows.headBase, e.idx(group));
        TiledAttentionBuilder builder(e, shape, f, out, op.getQ());
        auto [lo, hi] = builder.visibleKeyRange(rows);

        // Phase 1: the cached context through the block table.
        KvWalk cache;
        cache.lo = lo;
        cache.hi = e.min(hi, ctx);
        Value kc = op.getKCache(), vc = op.getVCache(), bt = op.getBlockTable();
        cache.load = [=](LoopEmitter &e, Value key, Value slot, Value kt,
                         Value vt) {
          Value blk = e.loadIndex(bt, {bIdx, e.divU(key, e.idx(blockSize))});
          Value off = e.remU(key, e.idx(blockSize));
          e.forLoop(0, shape.headDim, [&](Value d) {
            Value dHi = e.divU(d, e.idx(split)), dLo = e.remU(d, e.idx(split));
            e.store(e.load32(kc, {blk, kvHead, dHi, off, dLo}, kScale), kt,
                    {slot, d});
            e.store(e.load32(vc, {blk, kvHead, d, off}, vScale), vt,
                    {slot, d});
          });
        };
        // Phase 2: the new tokens, causally.
        KvWalk fresh;
        fresh.lo = e.max(lo, ctx);
        fresh.hi = e.min(hi, lenK);
        fresh.load = denseLoader(op.getK(), op.getV(), e.sub(qStart, ctx),
                                 kvHead, shape.headDim, Value(), Value());
        builder.emitProgram(rows, {cache, fresh});
      });
    });
    rewriter.eraseOp(op);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// attn.unified
//===----------------------------------------------------------------------===//

struct LowerUnified : OpRewritePattern<UnifiedOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(UnifiedOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    LoopEmitter e(b);
    TileShape shape = shapeOf(op, op.getHeadDim());
    int64_t group = op.getNumQueryHeads() / op.getNumKvHeads();
    int64_t blockSize = op.getBlockSize();
    int64_t segments =
        op.isSplitKv() ? op.getNumSegmentsAttr().getInt() : int64_t(1);

    AttentionFeatures f;
    f.scale = op.getScale();
    f.softcap = op.getSoftcap();
    f.alibiSlopes = op.getAlibiSlopes();
    f.alibiForm = op.getAlibiFormOrDefault();
    f.sinks = op.getSinks();
    f.window = op.getSlidingWindowAttr()
                   ? std::optional<int64_t>(op.getSlidingWindowAttr().getInt())
                   : std::nullopt;
    f.causal = true;
    AttentionOutput out{op.getOut(), op.getOutScale(), op.getSegmentMax(),
                        op.getSegmentSum()};
    Value qScale = scaleOrNull(e, op.getQDescale());
    Value kScale = scaleOrNull(e, op.getKDescale());
    Value vScale = scaleOrNull(e, op.getVDescale());

    Value batch = memref::DimOp::create(b, op.getSequsedK(), 0);
    Value tiles = maxTiles(e, op.getCuSeqlensQ(), batch, shape.blockQ);
    Value groups = e.idx(op.getNumQueryHeads() / shape.pack);
    grid(e, {batch, tiles, groups, e.idx(segments)}, [&](ValueRange iv) {
      Value bIdx = iv[0], t = iv[1], g = iv[2], s = iv[3];
      SeqRange qRange = seqRange(e, op.getCuSeqlensQ(), bIdx);
      Value qStart = qRange.start, lenQ = qRange.len;
      Value lenK = e.loadIndex(op.getSequsedK(), {bIdx});
      Value ctx = e.sub(lenK, lenQ);
      e.ifThen(e.lt(e.mul(t, e.idx(shape.blockQ)), lenQ), [&] {
        ProgramRows rows =
            tileRows(e, shape, bIdx, t, g, qStart, lenQ, lenK, ctx);
        rows.segment = s;
        rows.qScale = qScale;
        Value kvHead = e.divU(rows.headBase, e.idx(group));
        TiledAttentionBuilder builder(e, shape, f, out, op.getQ());
        auto [lo, hi] = builder.visibleKeyRange(rows);
        KvWalk walk;
        walk.lo = lo;
        walk.hi = e.min(hi, lenK);
        if (op.isSplitKv()) {
          // Segment s: pages [s * pps, (s + 1) * pps), pps = ceil(N / (S*BS)).
          Value pps = e.ceilDiv(lenK, e.idx(segments * blockSize));
          Value segKeys = e.mul(pps, e.idx(blockSize));
          walk.lo = e.max(walk.lo, e.mul(s, segKeys));
          walk.hi = e.min(walk.hi, e.mul(e.add(s, e.idx(1)), segKeys));
        }
        Value kc = op.getKCache(), vc = op.getVCache(),
              bt = op.getBlockTable();
        walk.load = [=](LoopEmitter &e, Value key, Value slot, Value kt,
                        Value vt) {
          Value blk = e.loadIndex(bt, {bIdx, e.divU(key, e.idx(blockSize))});
          Value off = e.remU(key, e.idx(blockSize));
          e.forLoop(0, shape.headDim, [&](Value d) {
            e.store(e.load32(kc, {blk, off, kvHead, d}, kScale), kt,
                    {slot, d});
            e.store(e.load32(vc, {blk, off, kvHead, d}, vScale), vt,
                    {slot, d});
          });
        };
        builder.emitProgram(rows, {walk});
      });
    });
    rewriter.eraseOp(op);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// attn.flash
//===----------------------------------------------------------------------===//

struct LowerFlash : OpRewritePattern<FlashOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(FlashOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    LoopEmitter e(b);
    TileShape shape = shapeOf(op, op.getHeadDim());
    int64_t group = op.getNumQueryHeads() / op.getNumKvHeads();

    AttentionFeatures f;
    f.scale = op.getScale();
    f.causal = op.getCausal();
    f.bias = op.getBias();
    f.dropoutP = op.getDropoutP();
    f.philoxSeed = op.getPhiloxSeed();
    f.philoxOffset = op.getPhiloxOffset();
    f.numQueryHeads = op.getNumQueryHeads();
    bool fp8 = isFp8Type(elemOf(op.getQ()));
    if (fp8) {
      f.pScale = e.loadScalar(op.getPScale());
      f.pQuantType = elemOf(op.getV());
    }
    AttentionOutput out{op.getOut(), op.getOutScale(), {}, {}};
    Value qScale = scaleOrNull(e, op.getQScale());
    Value kScale = scaleOrNull(e, op.getKScale());
    Value vScale = scaleOrNull(e, op.getVScale());

    emitDenseVarlenGrid(e, shape, op.getNumQueryHeads(), group, f, out,
                        op.getQ(), op.getK(), op.getV(), op.getCuSeqlensQ(),
                        op.getCuSeqlensK(), qScale, kScale, vScale,
                        [](LoopEmitter &, const ProgramRows &, KvWalk &) {});
    rewriter.eraseOp(op);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// attn.blocksparse
//===----------------------------------------------------------------------===//

struct LowerBlockSparse : OpRewritePattern<BlockSparseOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(BlockSparseOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    LoopEmitter e(b);
    TileShape shape = shapeOf(op, op.getHeadDim());
    int64_t group = op.getNumQueryHeads() / op.getNumKvHeads();
    int64_t blockSize = op.getBlockSizeAttr().getInt();
    int64_t qBlockSize = op.getQueryBlockSize();
    bool perHead = op.hasPerHeadLayout();

    AttentionFeatures f;
    f.scale = op.getScale();
    f.causal = true;
    AttentionOutput out{op.getOut(), {}, {}, {}};

    Value crow = op.getCrow(), col = op.getCol();
    Value numRows = e.sub(memref::DimOp::create(b, crow, 1), e.idx(1));
    auto csrWalk = [&](LoopEmitter &e, const ProgramRows &rows, KvWalk &walk) {
      // The schedule keeps a program's tokens inside one layout row.
      Value layoutRow = e.divU(rows.qposBase, e.idx(qBlockSize));
      Value layoutHead = perHead ? rows.headBase : e.idx(0);
      Value lo = walk.lo, hi = walk.hi;
      walk.forEachRange = [=](LoopEmitter &e,
                              llvm::function_ref<void(Value, Value)> visit) {
        // Rows past the layout select nothing (never read out of bounds).
        e.ifThen(e.lt(layoutRow, numRows), [&] {
          Value begin = e.loadIndex(crow, {layoutHead, layoutRow});
          Value end =
              e.loadIndex(crow, {layoutHead, e.add(layoutRow, e.idx(1))});
          e.forLoop(begin, end, [&](Value entry) {
            Value blockId = e.loadIndex(col, {layoutHead, entry});
            Value first = e.mul(blockId, e.idx(blockSize));
            visit(e.max(first, lo),
                  e.min(e.add(first, e.idx(blockSize)), hi));
          });
        });
      };
    };
    emitDenseVarlenGrid(e, shape, op.getNumQueryHeads(), group, f, out,
                        op.getQ(), op.getK(), op.getV(), op.getCuSeqlensQ(),
                        op.getCuSeqlensK(), Value(), Value(), Value(), csrWalk);
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::attn::populateAttnKernelToSCFPatterns(RewritePatternSet &patterns) {
  patterns.add<LowerPrefixPrefill, LowerUnified, LowerFlash, LowerBlockSparse>(
      patterns.getContext());
}

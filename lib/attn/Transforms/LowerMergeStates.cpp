//===- LowerMergeStates.cpp - attn.merge_states -> loops --------*- C++ -*-===//
//
// docs/semantics.md, section 3.5: a parallel loop over (token, head) that
// rescales every segment by exp(m_s - M) and normalizes once.
//
//===----------------------------------------------------------------------===//

#include "LoopEmitter.h"
#include "attn/IR/AttnOps.h"
#include "attn/Transforms/Passes.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::attn;

namespace {
struct LowerMergeStates : OpRewritePattern<MergeStatesOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MergeStatesOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    LoopEmitter e(b);
    Value partial = op.getPartial();
    int64_t headDim = cast<MemRefType>(partial.getType()).getDimSize(3);
    bool lse = op.isLseForm();
    Value stat = lse ? op.getSegmentLse() : op.getSegmentMax();
    Value tokens = memref::DimOp::create(b, partial, 0);
    Value heads = memref::DimOp::create(b, partial, 1);
    Value segments = memref::DimOp::create(b, partial, 2);

    auto par = scf::ParallelOp::create(b, ValueRange{e.idx(0), e.idx(0)},
                                       ValueRange{tokens, heads},
                                       ValueRange{e.idx(1), e.idx(1)});
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(par.getBody()->getTerminator());
    Value t = par.getInductionVars()[0], h = par.getInductionVars()[1];
    auto exp = [&](Value x) { return math::ExpOp::create(b, x).getResult(); };

    Value globalMax = e.reduce(e.idx(0), segments, e.negInf(),
                               [&](Value s, Value m) {
                                 return e.maxF(m, e.load(stat, {t, h, s}));
                               });
    Value sink = op.getSinks() ? e.load(op.getSinks(), {h}) : Value();
    if (sink)
      globalMax = e.maxF(globalMax, sink);
    // All segments empty (and no sink): every weight is exp(-inf) = 0.
    Value safeMax = e.select(
        e.cmpF(arith::CmpFPredicate::OEQ, globalMax, e.negInf()), e.f32(0.0),
        globalMax);
    auto weight = [&](Value s) {
      return exp(e.subF(e.load(stat, {t, h, s}), safeMax));
    };
    Value denom = e.reduce(e.idx(0), segments, e.f32(0.0),
                           [&](Value s, Value sum) {
                             Value w = weight(s);
                             if (!lse)
                               w = e.mulF(w, e.load(op.getSegmentSum(),
                                                    {t, h, s}));
                             return e.addF(sum, w);
                           });
    if (sink)
      denom = e.addF(denom, exp(e.subF(sink, safeMax)));
    Value inv = e.select(e.cmpF(arith::CmpFPredicate::OGT, denom, e.f32(0.0)),
                         e.divF(e.f32(1.0), denom), e.f32(0.0));
    if (op.getOutScale())
      inv = e.divF(inv, e.loadScalar(op.getOutScale()));
    e.forLoop(0, headDim, [&](Value d) {
      Value num = e.reduce(e.idx(0), segments, e.f32(0.0),
                           [&](Value s, Value sum) {
                             return e.addF(sum,
                                           e.mulF(weight(s),
                                                  e.load(partial, {t, h, s, d})));
                           });
      e.storeFrom32(e.mulF(num, inv), op.getOut(), {t, h, d});
    });
    rewriter.eraseOp(op);
    return success();
  }
};
} // namespace

void mlir::attn::populateMergeStatesToSCFPatterns(RewritePatternSet &patterns) {
  patterns.add<LowerMergeStates>(patterns.getContext());
}

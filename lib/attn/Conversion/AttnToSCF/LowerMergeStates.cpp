//===- LowerMergeStates.cpp - attn.merge_states -> programs -----*- C++ -*-===//
//
// docs/semantics.md, section 3.5: a grid over (token, head) whose programs
// rescale every segment by exp(m_s - M) and normalize once.
//
//===----------------------------------------------------------------------===//

#include "attn/Conversion/AttnToSCF/KernelLowering.h"
#include "attn/Conversion/Passes.h"
#include "attn/IR/AttnOps.h"

using namespace mlir;
using namespace mlir::attn;

void mlir::attn::emitMergeStates(LoopEmitter &e, ProgramTarget &target,
                                 MergeStatesOp op) {
  ImplicitLocOpBuilder &b = e.builder();
  Value partial = op.getPartial();
  int64_t headDim = cast<MemRefType>(partial.getType()).getDimSize(3);
  bool lse = op.isLseForm();
  Value stat = lse ? op.getSegmentLse() : op.getSegmentMax();
  Value segments = memref::DimOp::create(b, partial, 2);
  Value outScale = op.getOutScale() ? e.loadScalar(op.getOutScale()) : Value();

  FailureOr<SmallVector<GridExtent>> extents = kernelGrid(op);
  SmallVector<Value> ubs;
  for (const GridExtent &x : *extents)
    ubs.push_back(x.materialize(e, op->getOperands()));
  target.grid(e, ubs, [&](ValueRange iv) {
    Value t = iv[0], h = iv[1];
    auto exp = [&](Value x) {
      // exp(x) = exp2(x * log2(e)), through the target's exp2.
      return e.exp2(e.mulF(x, e.f32(1.4426950408889634)));
    };
    Value globalMax =
        e.reduce(e.idx(0), segments, e.negInf(), [&](Value s, Value m) {
          return e.maxF(m, e.load(stat, {t, h, s}));
        });
    Value sink = op.getSinks() ? e.load(op.getSinks(), {h}) : Value();
    if (sink)
      globalMax = e.maxF(globalMax, sink);
    // All segments empty (and no sink): every weight is exp(-inf) = 0.
    Value safeMax =
        e.select(e.cmpF(arith::CmpFPredicate::OEQ, globalMax, e.negInf()),
                 e.f32(0.0), globalMax);
    // One pass over the segments for the denominator and each element's
    // numerator together (after the max): a decode step's merge is a chain
    // of dependent loads per segment, so each pass costs latency. Every
    // element sums the same weights in the same order.
    target.spread(e, e.idx(0), e.idx(headDim), [&](Value d) {
      SmallVector<Value> sums = e.reduceN(
          e.idx(0), segments, {e.f32(0.0), e.f32(0.0)},
          [&](Value s, ValueRange acc) -> SmallVector<Value> {
            Value w = exp(e.subF(e.load(stat, {t, h, s}), safeMax));
            Value dw =
                lse ? w : e.mulF(w, e.load(op.getSegmentSum(), {t, h, s}));
            return {e.addF(acc[0], dw),
                    e.addF(acc[1], e.mulF(w, e.load32(partial, {t, h, s, d})))};
          });
      Value denom = sums[0];
      if (sink)
        denom = e.addF(denom, exp(e.subF(sink, safeMax)));
      Value inv = e.select(e.cmpF(arith::CmpFPredicate::OGT, denom, e.f32(0.0)),
                           e.divF(e.f32(1.0), denom), e.f32(0.0));
      if (outScale)
        inv = e.divF(inv, outScale);
      e.storeOutput(e.mulF(sums[1], inv), op.getOut(), {t, h, d},
                    bool(outScale));
    });
  });
}

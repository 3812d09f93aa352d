//===- ConvertAttnToSCF.cpp - convert-attn-to-scf pass ----------*- C++ -*-===//

#include "attn/Conversion/Passes.h"
#include "attn/IR/AttnOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::attn {
#define GEN_PASS_DEF_CONVERTATTNTOSCF
#include "attn/Conversion/Passes.h.inc"
} // namespace mlir::attn

using namespace mlir;
using namespace mlir::attn;

namespace {
struct ConvertAttnToSCFPass
    : public mlir::attn::impl::ConvertAttnToSCFBase<ConvertAttnToSCFPass> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateAttnToSCFPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // Every attn op has a pattern; one left over is a lowering bug.
    WalkResult leftover = getOperation()->walk([](Operation *op) {
      if (isa<AttnDialect>(op->getDialect())) {
        op->emitError("convert-attn-to-scf: op was not lowered");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (leftover.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace

//===- Passes.h - attn transformation passes --------------------*- C++ -*-===//

#ifndef ATTN_TRANSFORMS_PASSES_H
#define ATTN_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Pass/Pass.h"

namespace mlir::attn {

#define GEN_PASS_DECL
#include "attn/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "attn/Transforms/Passes.h.inc"

/// Patterns lowering the four kernel ops to tiled online-softmax loops.
void populateAttnKernelToSCFPatterns(RewritePatternSet &patterns);
/// The pattern lowering attn.merge_states to a loop nest.
void populateMergeStatesToSCFPatterns(RewritePatternSet &patterns);
/// All of the above.
void populateAttnToSCFPatterns(RewritePatternSet &patterns);

} // namespace mlir::attn

#endif // ATTN_TRANSFORMS_PASSES_H

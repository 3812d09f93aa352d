//===- Passes.h - attn conversion passes ------------------------*- C++ -*-===//
//
// convert-attn-to-scf and convert-attn-to-gpu. The GPU backends (NVVM,
// ROCDL) register themselves with convert-attn-to-gpu
// (attn/Conversion/AttnToGPU/Targets.h); this header names none of them.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_CONVERSION_PASSES_H
#define ATTN_CONVERSION_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir::attn {

#define GEN_PASS_DECL
#include "attn/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "attn/Conversion/Passes.h.inc"

/// The pattern lowering every attn op (the four kernels and merge_states) to
/// an scf.parallel grid of tiled online-softmax loop programs.
void populateAttnToSCFPatterns(RewritePatternSet &patterns);

} // namespace mlir::attn

#endif // ATTN_CONVERSION_PASSES_H

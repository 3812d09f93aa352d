//===- Passes.h - attn transformation passes --------------------*- C++ -*-===//
//
// Passes that stay at the attn level (attn-plan) or raise into it
// (attn-raise-sdpa); the lowerings out of the
// dialect are in attn/Conversion/Passes.h.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_TRANSFORMS_PASSES_H
#define ATTN_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir::attn {

#define GEN_PASS_DECL
#include "attn/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "attn/Transforms/Passes.h.inc"

} // namespace mlir::attn

#endif // ATTN_TRANSFORMS_PASSES_H

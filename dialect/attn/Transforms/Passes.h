//===- Passes.h - attn transformation passes --------------------*- C++ -*-===//

#ifndef ATTN_TRANSFORMS_PASSES_H
#define ATTN_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Pass/Pass.h"

namespace mlir::attn {

#define GEN_PASS_DECL
#include "attn/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "attn/Transforms/Passes.h.inc"

/// The pattern lowering every attn op (the four kernels and merge_states) to
/// an scf.parallel grid of tiled online-softmax loop programs.
void populateAttnToSCFPatterns(RewritePatternSet &patterns);

} // namespace mlir::attn

#endif // ATTN_TRANSFORMS_PASSES_H

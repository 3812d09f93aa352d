//===- Passes.h - attn transformation passes --------------------*- C++ -*-===//

#ifndef ATTN_TRANSFORMS_PASSES_H
#define ATTN_TRANSFORMS_PASSES_H

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
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

/// What an NVIDIA chip offers the warp programs (convert-attn-to-gpu) and
/// the PTX they need (attn-lower-to-nvvm-pipeline).
struct NvidiaChip {
  bool wgmma = false; // warpgroup MMAs (sm_90a)
  bool fp8 = false;   // fp8 mma.sync shapes, cvt of fp8 pairs (sm_89 and up)
  /// From a chip name: sm_XY[a].
  static NvidiaChip parse(StringRef chip);
  /// The PTX ISA feature the programs need: fp8 mma.sync needs 8.4.
  StringRef ptxFeatures() const { return fp8 ? "+ptx84" : "+ptx80"; }
};

/// The pattern lowering every attn op (the four kernels and merge_states) to
/// an scf.parallel grid of tiled online-softmax loop programs.
void populateAttnToSCFPatterns(RewritePatternSet &patterns);

} // namespace mlir::attn

#endif // ATTN_TRANSFORMS_PASSES_H

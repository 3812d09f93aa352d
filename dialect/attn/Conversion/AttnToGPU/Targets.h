//===- Targets.h - the GPU backends of convert-attn-to-gpu ------*- C++ -*-===//
//
// Each backend library registers its GpuTarget under its target name;
// registerAttnGpuTargets() registers every backend built into this
// attn-mlir (CMake's ATTN_ENABLE_NVVM / ATTN_ENABLE_ROCDL). Tools and
// pipelines call it once before running convert-attn-to-gpu.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_CONVERSION_ATTNTOGPU_TARGETS_H
#define ATTN_CONVERSION_ATTNTOGPU_TARGETS_H

namespace mlir::attn {

/// "nvvm": warps of mma.sync, warpgroups of wgmma on sm_90a
/// (MLIRAttnToNVVM).
void registerNvvmTarget();
/// "rocdl": waves of MFMA (gfx90a, gfx942) or WMMA (gfx1100)
/// (MLIRAttnToROCDL).
void registerRocdlTarget();
/// Every backend built in (MLIRAttnGpuTargets).
void registerAttnGpuTargets();

} // namespace mlir::attn

#endif // ATTN_CONVERSION_ATTNTOGPU_TARGETS_H

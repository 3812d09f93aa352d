//===- Pipelines.h - attn lowering pipelines --------------------*- C++ -*-===//

#ifndef ATTN_PIPELINES_PIPELINES_H
#define ATTN_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassOptions.h"

namespace mlir {
class OpPassManager;
namespace attn {

/// Options of `attn-lower-to-cpu-pipeline`.
struct CpuPipelineOptions : public PassPipelineOptions<CpuPipelineOptions> {
  PassOptions::Option<bool> emitCInterface{
      *this, "emit-c-interface",
      llvm::cl::desc("Give every function a C-callable _mlir_ciface_ wrapper "
                     "(what the Python runtime calls)"),
      llvm::cl::init(true)};
};

/// attn ops -> tiled loops (CPU schedule) -> LLVM dialect for the host.
void buildLowerToCpuPipeline(OpPassManager &pm,
                             const CpuPipelineOptions &options);

/// Registers every attn pipeline with the pass registry.
void registerAttnPipelines();

} // namespace attn
} // namespace mlir

#endif // ATTN_PIPELINES_PIPELINES_H

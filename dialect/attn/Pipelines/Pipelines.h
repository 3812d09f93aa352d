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
  PassOptions::Option<std::string> planTarget{
      *this, "plan-target",
      llvm::cl::desc("Whose default tile schedules to run (cpu, nvvm or "
                     "rocdl): the CPU program runs any target's tile sizes, "
                     "so that target's schedule logic is checked here"),
      llvm::cl::init("cpu")};
  PassOptions::Option<std::string> planChip{
      *this, "plan-chip",
      llvm::cl::desc("Chip of plan-target (e.g. sm_90a, gfx942)"),
      llvm::cl::init("")};
};

/// attn ops -> tiled loops (CPU schedule) -> LLVM dialect for the host.
void buildLowerToCpuPipeline(OpPassManager &pm,
                             const CpuPipelineOptions &options);

/// Options of `attn-lower-to-nvvm-pipeline`.
struct NvvmPipelineOptions : public PassPipelineOptions<NvvmPipelineOptions> {
  PassOptions::Option<std::string> chip{
      *this, "chip",
      llvm::cl::desc("NVIDIA target: sm_80, sm_86, sm_89, sm_90 or sm_90a"),
      llvm::cl::init("sm_80")};
  PassOptions::Option<std::string> features{
      *this, "features",
      llvm::cl::desc("PTX features (PTX ISA version); by default +ptx84 for "
                     "sm_89 and up (fp8 mma.sync), +ptx80 below"),
      llvm::cl::init("")};
  PassOptions::Option<std::string> format{
      *this, "format",
      llvm::cl::desc("What gpu-module-to-binary embeds: isa (PTX text), bin "
                     "(cubin through ptxas) or fatbin"),
      llvm::cl::init("isa")};
  PassOptions::Option<int> optLevel{
      *this, "opt-level", llvm::cl::desc("LLVM optimization level (0-3)"),
      llvm::cl::init(3)};
  PassOptions::Option<std::string> f32Precision{
      *this, "f32-precision",
      llvm::cl::desc("Products of f32 ops: tf32 (one tf32 MMA, as vLLM) or "
                     "3xtf32 (about f32's accuracy; convert-attn-to-gpu)"),
      llvm::cl::init("tf32")};
};

/// attn ops -> gpu.module kernels (tensor-core programs) -> NVVM -> PTX or
/// cubin in a gpu.binary; the host keeps gpu.launch_func ops.
void buildLowerToNvvmPipeline(OpPassManager &pm,
                              const NvvmPipelineOptions &options);

/// Options of `attn-lower-to-rocdl-pipeline`.
struct RocdlPipelineOptions : public PassPipelineOptions<RocdlPipelineOptions> {
  PassOptions::Option<std::string> chip{
      *this, "chip",
      llvm::cl::desc("AMD target: gfx90a or gfx942 (CDNA, wave64 MFMA) or "
                     "gfx1100 (RDNA3, wave32 WMMA)"),
      llvm::cl::init("gfx942")};
  PassOptions::Option<std::string> format{
      *this, "format",
      llvm::cl::desc("What gpu-module-to-binary embeds: isa (AMDGPU "
                     "assembly) or bin (an HSACO code object, linked with "
                     "ld.lld)"),
      llvm::cl::init("bin")};
  PassOptions::Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("Directory with llvm/bin/ld.lld for format=bin; by "
                     "default the one configured at build time"),
      llvm::cl::init("")};
  PassOptions::Option<int> optLevel{
      *this, "opt-level", llvm::cl::desc("LLVM optimization level (0-3)"),
      llvm::cl::init(3)};
};

/// attn ops -> gpu.module kernels (MFMA/WMMA wave programs) -> ROCDL ->
/// AMDGPU assembly or an HSACO code object in a gpu.binary; the host keeps
/// gpu.launch_func ops. Uses no ROCm device library.
void buildLowerToRocdlPipeline(OpPassManager &pm,
                               const RocdlPipelineOptions &options);

/// Registers every attn pipeline with the pass registry.
void registerAttnPipelines();

} // namespace attn
} // namespace mlir

#endif // ATTN_PIPELINES_PIPELINES_H

//===- Pipelines.cpp - attn lowering pipelines ------------------*- C++ -*-===//

#include "attn/Pipelines/Pipelines.h"
#include "attn/Transforms/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/NVGPUToNVVM/NVGPUToNVVM.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/Transforms/RequestCWrappers.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::attn;

void mlir::attn::buildLowerToCpuPipeline(OpPassManager &pm,
                                         const CpuPipelineOptions &options) {
  // attn -> tiled loops with the CPU schedule.
  pm.addPass(
      createAttnPlan(AttnPlanOptions{options.planTarget, options.planChip}));
  pm.addPass(createConvertAttnToSCF());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (options.emitCInterface)
    pm.addNestedPass<func::FuncOp>(LLVM::createLLVMRequestCWrappersPass());
  // Loops -> LLVM. bf16 conversions are expanded to integer code; fp8 is
  // already integer code (Fp8Codec); tanh goes to libm.
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void mlir::attn::buildLowerToNvvmPipeline(OpPassManager &pm,
                                          const NvvmPipelineOptions &options) {
  pm.addPass(createAttnPlan(AttnPlanOptions{"nvvm", options.chip}));
  pm.addPass(
      createConvertAttnToGPU(ConvertAttnToGPUOptions{"nvvm", options.chip}));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // Kernels -> NVVM (nvgpu's ldmatrix/cp.async, gpu ids/shuffles/barriers,
  // memref/arith/vector/math) -> PTX or cubin.
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  kernels.addPass(createSCFToControlFlowPass());
  kernels.addPass(createConvertNVGPUToNVVMPass());
  kernels.addPass(createConvertGpuOpsToNVVMOps());
  kernels.addPass(createCanonicalizerPass());
  kernels.addPass(createCSEPass());
  kernels.addPass(createReconcileUnrealizedCastsPass());
  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.features = options.features;
  if (target.features.empty())
    target.features = NvidiaChip::parse(options.chip).ptxFeatures().str();
  target.optLevel = options.optLevel;
  pm.addPass(createGpuNVVMAttachTarget(target));
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = options.format;
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

void mlir::attn::registerAttnPipelines() {
  PassPipelineRegistration<NvvmPipelineOptions>(
      "attn-lower-to-nvvm-pipeline",
      "Lower attn ops to NVIDIA tensor-core kernels (mma.sync, ldmatrix, "
      "cp.async) in a gpu.module, then to NVVM and PTX or cubin",
      buildLowerToNvvmPipeline);
  PassPipelineRegistration<CpuPipelineOptions>(
      "attn-lower-to-cpu-pipeline",
      "Lower attn ops to tiled loops with the CPU schedule, then to the LLVM "
      "dialect for the host (the reference execution path)",
      buildLowerToCpuPipeline);
}

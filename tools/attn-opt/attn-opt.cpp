//===- attn-opt.cpp - the attn-mlir optimizer driver -----------*- C++ -*-===//
//
// An mlir-opt-style driver with the attn dialect, the upstream dialects its
// pipelines produce, and every attn pass and pipeline registered.
//
//===----------------------------------------------------------------------===//

#include "attn/Conversion/AttnToGPU/Targets.h"
#include "attn/Conversion/Passes.h"
#include "attn/IR/AttnDialect.h"
#include "attn/Pipelines/Pipelines.h"
#include "attn/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVM/ROCDL/Target.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mlir::attn::registerAttnPasses();
  mlir::attn::registerAttnConversionPasses();
  mlir::attn::registerAttnGpuTargets();
  mlir::attn::registerAttnPipelines();

  mlir::DialectRegistry registry;
  registry.insert<mlir::attn::AttnDialect>();
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // gpu-module-to-binary: LLVM IR translation and the NVPTX and AMDGPU
  // serializers of the backends built in.
  mlir::registerAllToLLVMIRTranslations(registry);
#ifdef ATTN_ENABLE_NVVM
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
#endif
#ifdef ATTN_ENABLE_ROCDL
  mlir::ROCDL::registerROCDLTargetInterfaceExternalModels(registry);
#endif

  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "attn-mlir optimizer driver\n", registry));
}

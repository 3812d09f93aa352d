//===- InitAll.cpp - register everything attn-mlir provides ---------------===//

#include "attn/InitAll.h"
#include "attn/Conversion/AttnToGPU/Targets.h"
#include "attn/Conversion/Passes.h"
#include "attn/IR/AttnDialect.h"
#include "attn/Pipelines/Pipelines.h"
#include "attn/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#ifdef ATTN_ENABLE_NVVM
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#endif
#ifdef ATTN_ENABLE_ROCDL
#include "mlir/Target/LLVM/ROCDL/Target.h"
#include "mlir/Target/LLVMIR/Dialect/ROCDL/ROCDLToLLVMIRTranslation.h"
#endif

#include <mutex>

void mlir::attn::registerAllDialects(DialectRegistry &registry) {
  registry.insert<AttnDialect>();
}

void mlir::attn::registerAllExtensions(DialectRegistry &registry) {
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
#ifdef ATTN_ENABLE_NVVM
  registerNVVMDialectTranslation(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
#endif
#ifdef ATTN_ENABLE_ROCDL
  registerROCDLDialectTranslation(registry);
  ROCDL::registerROCDLTargetInterfaceExternalModels(registry);
#endif
}

// Passes go into process-wide registries, where a second registration of
// a name is an error: a library loaded into a tool that has registered them
// already (plugin + C API, say) must be able to call this again.
void mlir::attn::registerAllPasses() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerAttnGpuTargets();
    registerAttnPasses();
    registerAttnConversionPasses();
  });
}

void mlir::attn::registerAllPipelines() {
  static std::once_flag once;
  std::call_once(once, [] { registerAttnPipelines(); });
}

void mlir::attn::registerAll(DialectRegistry &registry) {
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllPasses();
  registerAllPipelines();
}

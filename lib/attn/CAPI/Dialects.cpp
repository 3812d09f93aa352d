//===- Dialects.cpp - C API of attn-mlir ----------------------------------===//

#include "attn-c/Dialects.h"
#include "attn/Conversion/AttnToGPU/Targets.h"
#include "attn/IR/AttnDialect.h"
#include "attn/InitAll.h"
#include "attn/Pipelines/Pipelines.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Pass.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/CAPI/Support.h"
#include "mlir/CAPI/Utils.h"

using namespace mlir;

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(Attn, attn, mlir::attn::AttnDialect)

void attnRegisterAllDialects(MlirDialectRegistry registry) {
  attn::registerAllDialects(*unwrap(registry));
  attn::registerAllExtensions(*unwrap(registry));
}

void attnRegisterAllPasses(void) {
  attn::registerAllPasses();
  attn::registerAllPipelines();
}

namespace {
/// Parses `options` into a pipeline's option struct and builds it into
/// `passManager`; the parser's message goes to the callback.
template <typename Options>
MlirLogicalResult addPipeline(MlirOpPassManager passManager,
                              MlirStringRef options,
                              MlirStringCallback errorCallback, void *userData,
                              void (*build)(OpPassManager &, const Options &)) {
  // convert-attn-to-gpu dispatches to the backends registered here.
  attn::registerAttnGpuTargets();
  Options parsed;
  std::string message;
  llvm::raw_string_ostream os(message);
  if (failed(parsed.parseFromString(unwrap(options), os))) {
    if (errorCallback)
      errorCallback(wrap(StringRef(message)), userData);
    return mlirLogicalResultFailure();
  }
  build(*unwrap(passManager), parsed);
  return mlirLogicalResultSuccess();
}

[[maybe_unused]] MlirLogicalResult notBuilt(const char *backend,
                                            MlirStringCallback errorCallback,
                                            void *userData) {
  std::string message =
      std::string("attn-mlir was built without the ") + backend + " backend";
  if (errorCallback)
    errorCallback(wrap(StringRef(message)), userData);
  return mlirLogicalResultFailure();
}
} // namespace

MlirLogicalResult attnAddLowerToCpuPipeline(MlirOpPassManager passManager,
                                            MlirStringRef options,
                                            MlirStringCallback errorCallback,
                                            void *userData) {
  return addPipeline<attn::CpuPipelineOptions>(passManager, options,
                                               errorCallback, userData,
                                               attn::buildLowerToCpuPipeline);
}

MlirLogicalResult attnAddLowerToNvvmPipeline(MlirOpPassManager passManager,
                                             MlirStringRef options,
                                             MlirStringCallback errorCallback,
                                             void *userData) {
#ifdef ATTN_ENABLE_NVVM
  return addPipeline<attn::NvvmPipelineOptions>(passManager, options,
                                                errorCallback, userData,
                                                attn::buildLowerToNvvmPipeline);
#else
  return notBuilt("NVVM", errorCallback, userData);
#endif
}

MlirLogicalResult attnAddLowerToRocdlPipeline(MlirOpPassManager passManager,
                                              MlirStringRef options,
                                              MlirStringCallback errorCallback,
                                              void *userData) {
#ifdef ATTN_ENABLE_ROCDL
  return addPipeline<attn::RocdlPipelineOptions>(
      passManager, options, errorCallback, userData,
      attn::buildLowerToRocdlPipeline);
#else
  return notBuilt("ROCDL", errorCallback, userData);
#endif
}

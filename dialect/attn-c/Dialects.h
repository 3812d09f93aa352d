/*===- attn-c/Dialects.h - C API of attn-mlir ---------------------*- C -*-===*\
|*                                                                            *|
|* The attn dialect, its passes and pipelines for bindings in other          *|
|* languages, next to upstream's C API (mlir-c/IR.h, mlir-c/Pass.h,          *|
|* mlir-c/RegisterEverything.h), which libAttnMLIRCAPI.so carries too: a C   *|
|* program links this one library.                                           *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef ATTN_C_DIALECTS_H
#define ATTN_C_DIALECTS_H

#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

/* mlirGetDialectHandle__attn__(): insert or load the attn dialect. */
MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(Attn, attn);

/* Inserts the attn dialect and the extensions the GPU pipelines need (the
 * NVVM/ROCDL target attributes and translations to LLVM IR) into
 * `registry`. Upstream's dialects are the caller's to add (the passes load
 * the ones they produce). */
MLIR_CAPI_EXPORTED void attnRegisterAllDialects(MlirDialectRegistry registry);

/* Registers the attn passes and the attn-lower-to-*-pipeline pipelines in
 * the process-wide registries, so that textual pipelines
 * (mlirParsePassPipeline, mlirOpPassManagerAddPipeline) can name them.
 * Calling it again does nothing. */
MLIR_CAPI_EXPORTED void attnRegisterAllPasses(void);

/* Pipeline entry points: add attn-lower-to-{cpu,nvvm,rocdl}-pipeline with
 * `options` (the pipeline's textual options, e.g. "chip=sm_90a
 * format=isa"; empty for the defaults) to `passManager`. On bad options
 * nothing is added, the message goes to `errorCallback` (may be NULL) and
 * the result is failure. The NVVM and ROCDL entries fail with a message
 * when that backend was not built in. */
MLIR_CAPI_EXPORTED MlirLogicalResult
attnAddLowerToCpuPipeline(MlirOpPassManager passManager, MlirStringRef options,
                          MlirStringCallback errorCallback, void *userData);
MLIR_CAPI_EXPORTED MlirLogicalResult
attnAddLowerToNvvmPipeline(MlirOpPassManager passManager, MlirStringRef options,
                           MlirStringCallback errorCallback, void *userData);
MLIR_CAPI_EXPORTED MlirLogicalResult attnAddLowerToRocdlPipeline(
    MlirOpPassManager passManager, MlirStringRef options,
    MlirStringCallback errorCallback, void *userData);

#ifdef __cplusplus
}
#endif

#endif /* ATTN_C_DIALECTS_H */

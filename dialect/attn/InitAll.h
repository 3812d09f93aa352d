//===- InitAll.h - register everything attn-mlir provides -------*- C++ -*-===//
//
// The one registration entry point for tools that embed attn-mlir (attn-opt,
// the mlir-opt plugin, the C API, downstream compilers). Each function adds
// only what attn-mlir owns or needs beyond upstream's own registrations, so
// a tool that already called mlir::registerAllDialects/Passes can call these
// too without registering anything twice.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_INITALL_H
#define ATTN_INITALL_H

namespace mlir {
class DialectRegistry;

namespace attn {

/// The attn dialect. (The dialects its lowerings produce are dependent
/// dialects of the passes that produce them, loaded when they run.)
void registerAllDialects(DialectRegistry &registry);

/// What the GPU pipelines need from a context beyond the dialects: the
/// NVVM/ROCDL target attribute models that gpu-module-to-binary serializes
/// through, and the translations to LLVM IR, for the backends built in.
void registerAllExtensions(DialectRegistry &registry);

/// The attn passes (attn-plan, convert-attn-to-scf, convert-attn-to-gpu,
/// attn-nvvm-tensor-map-params) and the GPU backends they dispatch to.
void registerAllPasses();

/// attn-lower-to-{cpu,nvvm,rocdl}-pipeline.
void registerAllPipelines();

/// All four, for a tool with its own registry.
void registerAll(DialectRegistry &registry);

} // namespace attn
} // namespace mlir

#endif // ATTN_INITALL_H

//===- AttnPlugin.cpp - attn-mlir as an mlir-opt plugin -------------------===//
//
// One shared object that is both a dialect plugin and a pass plugin:
//   mlir-opt --load-dialect-plugin=AttnPlugin.so \
//            --load-pass-plugin=AttnPlugin.so \
//            --pass-pipeline='builtin.module(attn-lower-to-nvvm-pipeline)'
// The host tool must link MLIR as a shared library (Debian's mlir-opt-22
// does), so that the plugin registers into the tool's registries.
//
//===----------------------------------------------------------------------===//

#include "attn/InitAll.h"

#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/Config/llvm-config.h"

extern "C" LLVM_ATTRIBUTE_WEAK mlir::DialectPluginLibraryInfo
mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "AttnMLIR", LLVM_VERSION_STRING,
          [](mlir::DialectRegistry *registry) {
            mlir::attn::registerAllDialects(*registry);
            mlir::attn::registerAllExtensions(*registry);
          }};
}

extern "C" LLVM_ATTRIBUTE_WEAK mlir::PassPluginLibraryInfo
mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "AttnMLIR", LLVM_VERSION_STRING, []() {
            mlir::attn::registerAllPasses();
            mlir::attn::registerAllPipelines();
          }};
}

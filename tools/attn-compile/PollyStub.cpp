//===- PollyStub.cpp - Polly's plugin entry for static LLVM links --*- C++
//-*-===//
//
// Debian builds Polly into libLLVM.so, so its static LTO code (pulled in by
// LLD) calls getPollyPluginInfo(), which no static archive defines. Linked
// against the archives (ATTN_MLIR_STATIC_LLVM), attn-compile never runs LTO:
// this entry registers nothing.
//
//===----------------------------------------------------------------------===//

#include "llvm/Config/llvm-config.h"
#include "llvm/Plugins/PassPlugin.h"

llvm::PassPluginLibraryInfo getPollyPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "Polly (not linked)", LLVM_VERSION_STRING,
          [](llvm::PassBuilder &) {}};
}

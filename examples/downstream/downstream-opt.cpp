//===- downstream-opt.cpp - a downstream compiler's driver ----------------===//
//
// What an ML compiler adopting the attn dialect writes: its own dialects
// (here, upstream's) and attn-mlir's, registered through attn/InitAll.h.
//
//===----------------------------------------------------------------------===//

#include "attn/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllPasses();
  // The attn dialect, the GPU serialization it needs, its passes and the
  // attn-lower-to-{cpu,nvvm,rocdl}-pipeline pipelines.
  mlir::attn::registerAll(registry);
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "a downstream compiler with the attn dialect\n", registry));
}

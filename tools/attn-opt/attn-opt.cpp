//===- attn-opt.cpp - the attn-mlir optimizer driver -----------*- C++ -*-===//
//
// An mlir-opt-style driver: upstream's dialects, extensions and passes, and
// everything attn-mlir registers (attn/InitAll.h).
//
//===----------------------------------------------------------------------===//

#include "attn/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllToLLVMIRTranslations(registry);
  mlir::attn::registerAll(registry);

  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "attn-mlir optimizer driver\n", registry));
}

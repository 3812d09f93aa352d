//===- AttnDialect.cpp - attn dialect ---------------------------*- C++ -*-===//

#include "attn/IR/AttnDialect.h"
#include "attn/IR/AttnAttrs.h"
#include "attn/IR/AttnOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::attn;

#include "attn/IR/AttnEnums.cpp.inc"
#include "attn/IR/AttnOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "attn/IR/AttnAttrs.cpp.inc"

void AttnDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "attn/IR/AttnAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "attn/IR/AttnOps.cpp.inc"
      >();
}

//===- AttnOps.h - attn dialect operations ----------------------*- C++ -*-===//

#ifndef ATTN_IR_ATTNOPS_H
#define ATTN_IR_ATTNOPS_H

#include "attn/IR/AttnAttrs.h"
#include "attn/IR/AttnDialect.h"
#include "attn/IR/AttnKernelVisitor.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::attn {
/// Whether `type` is one of the fp8 element types the ops take (f8E4M3FN,
/// f8E5M2): the one test every verifier and lowering uses.
inline bool isFp8(Type type) {
  return type && isa<Float8E4M3FNType, Float8E5M2Type>(type);
}
} // namespace mlir::attn

#include "attn/IR/AttnInterfaces.h.inc"

#define GET_OP_CLASSES
#include "attn/IR/AttnOps.h.inc"

#endif // ATTN_IR_ATTNOPS_H

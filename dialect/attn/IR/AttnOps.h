//===- AttnOps.h - attn dialect operations ----------------------*- C++ -*-===//

#ifndef ATTN_IR_ATTNOPS_H
#define ATTN_IR_ATTNOPS_H

#include "attn/IR/AttnAttrs.h"
#include "attn/IR/AttnDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::attn::detail {
class OperandChecker;
} // namespace mlir::attn::detail

#define GET_OP_CLASSES
#include "attn/IR/AttnOps.h.inc"

#endif // ATTN_IR_ATTNOPS_H

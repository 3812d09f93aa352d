//===- AttnAttrs.h - attn dialect attributes --------------------*- C++ -*-===//

#ifndef ATTN_IR_ATTNATTRS_H
#define ATTN_IR_ATTNATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"

#include "attn/IR/AttnEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "attn/IR/AttnAttrs.h.inc"

#endif // ATTN_IR_ATTNATTRS_H

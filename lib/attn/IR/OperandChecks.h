//===- OperandChecks.h - shared verifier helpers ----------------*- C++ -*-===//
//
// The attn ops verify many memref operands against named layouts. These
// helpers produce one uniform diagnostic per rule, always naming the operand
// and the rule it breaks.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_LIB_IR_OPERANDCHECKS_H
#define ATTN_LIB_IR_OPERANDCHECKS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

namespace mlir::attn::detail {

/// Element-type classes an operand may accept (a bit set).
enum ElemClass : unsigned {
  kF32 = 1u << 0,
  kF16 = 1u << 1,
  kBF16 = 1u << 2,
  kF8E4M3 = 1u << 3,
  kF8E5M2 = 1u << 4,
  kI32 = 1u << 5,
  kI8 = 1u << 6,
  kHalfOrFloat = kF32 | kF16 | kBF16,
  kFp8 = kF8E4M3 | kF8E5M2,
};

/// The class of `type`, or 0 when it is none of the above.
unsigned classify(Type type);

/// Verifies the operands of one op.
class OperandChecker {
public:
  explicit OperandChecker(Operation *op) : op(op) {}

  /// `value` must be a strided memref whose rank equals `dims.size()` and
  /// whose element type is in `elems`. Returns its type, or null after
  /// emitting a diagnostic.
  MemRefType memref(Value value, StringRef name, ArrayRef<StringRef> dims,
                    unsigned elems);

  /// Dimension `dim` of the operand must be static, positive and at most
  /// `max` (a bound of AttnLimits.h).
  LogicalResult staticDim(MemRefType type, StringRef name,
                          ArrayRef<StringRef> dims, unsigned dim, int64_t max);

  /// Two dimensions must agree when both are static.
  LogicalResult sameDim(MemRefType a, StringRef aName,
                        ArrayRef<StringRef> aDims, unsigned aDim, MemRefType b,
                        StringRef bName, ArrayRef<StringRef> bDims,
                        unsigned bDim);

  /// A dimension must equal `expected` when static.
  LogicalResult dimEquals(MemRefType type, StringRef name,
                          ArrayRef<StringRef> dims, unsigned dim,
                          int64_t expected, StringRef why);

  /// A one-element f32 scale: memref<f32> or memref<1xf32>.
  LogicalResult scale(Value value, StringRef name);

  /// A one-element f32 scale or one per sequence and KV head:
  /// memref<[batch]x[kvHeads]xf32>, any strides.
  LogicalResult scaleOrPerSeqHead(Value value, StringRef name, int64_t kvHeads);

  /// A per-head f32 vector: memref<[heads]xf32>.
  LogicalResult perHead(Value value, StringRef name, int64_t heads);

  /// Operand `name` requires operand `needed` (or attribute) to be present.
  LogicalResult needs(bool present, bool neededPresent, StringRef name,
                      StringRef needed, StringRef why);

  /// `b` must have the element type of `a`.
  LogicalResult sameElem(MemRefType a, StringRef aName, MemRefType b,
                         StringRef bName);

  /// All dimensions of `b` must agree with those of `a` where both are static.
  LogicalResult sameShape(MemRefType a, StringRef aName, MemRefType b,
                          StringRef bName, ArrayRef<StringRef> dims);

  InFlightDiagnostic error(StringRef name);

private:
  Operation *op;
};

/// ODS checks the size of an optional operand group only; a required group
/// left empty (or given several values) by a generic-form or bytecode op
/// would reach the accessors. `groups` names each ODS operand group in order,
/// an optional one with a trailing '?'. Emits a diagnostic naming the first
/// operand whose group has the wrong number of values.
LogicalResult verifyOperandSegments(Operation *op, ArrayRef<int32_t> sizes,
                                    ArrayRef<StringRef> groups);

/// Names the element-type classes in `elems` for a diagnostic.
std::string describeElems(unsigned elems);

} // namespace mlir::attn::detail

#endif // ATTN_LIB_IR_OPERANDCHECKS_H

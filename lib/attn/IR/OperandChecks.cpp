//===- OperandChecks.cpp - shared verifier helpers --------------*- C++ -*-===//

#include "OperandChecks.h"
#include "attn/IR/AttnOps.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::attn::detail;

namespace {
/// Each element-type class: its bit, whether a type is in it, its name.
struct ElemKind {
  unsigned bit;
  bool (*matches)(Type);
  StringLiteral name;
};
constexpr ElemKind kElemKinds[] = {
    {kF32, [](Type t) { return t.isF32(); }, "f32"},
    {kF16, [](Type t) { return t.isF16(); }, "f16"},
    {kBF16, [](Type t) { return t.isBF16(); }, "bf16"},
    {kF8E4M3, [](Type t) { return isa<Float8E4M3FNType>(t); }, "f8E4M3FN"},
    {kF8E5M2, [](Type t) { return isa<Float8E5M2Type>(t); }, "f8E5M2"},
    {kI32, [](Type t) { return t.isSignlessInteger(32); }, "i32"},
    {kI8, [](Type t) { return t.isSignlessInteger(8); }, "i8"},
};
} // namespace

unsigned mlir::attn::detail::classify(Type type) {
  for (const ElemKind &c : kElemKinds)
    if (c.matches(type))
      return c.bit;
  return 0;
}

std::string mlir::attn::detail::describeElems(unsigned elems) {
  SmallVector<StringRef> names;
  for (const ElemKind &c : kElemKinds)
    if (elems & c.bit)
      names.push_back(c.name);
  return llvm::join(names, ", ");
}

static std::string describeDims(ArrayRef<StringRef> dims) {
  return "[" + llvm::join(dims, ", ") + "]";
}

InFlightDiagnostic OperandChecker::error(StringRef name) {
  return op->emitOpError() << "operand '" << name << "' ";
}

MemRefType OperandChecker::memref(Value value, StringRef name,
                                  ArrayRef<StringRef> dims, unsigned elems) {
  auto type = dyn_cast<MemRefType>(value.getType());
  if (!type || type.getRank() != static_cast<int64_t>(dims.size())) {
    error(name) << "must be a rank-" << dims.size() << " memref "
                << describeDims(dims) << ", got " << value.getType();
    return nullptr;
  }
  if (!(classify(type.getElementType()) & elems)) {
    error(name) << "must have element type " << describeElems(elems) << ", got "
                << type.getElementType();
    return nullptr;
  }
  if (!type.isStrided()) {
    error(name) << "must have a strided layout, got " << type.getLayout();
    return nullptr;
  }
  return type;
}

LogicalResult OperandChecker::staticDim(MemRefType type, StringRef name,
                                        ArrayRef<StringRef> dims, unsigned dim,
                                        int64_t max) {
  if (type.isDynamicDim(dim))
    return error(name) << "dimension " << dim << " (" << dims[dim]
                       << ") must be static";
  if (type.getDimSize(dim) <= 0)
    return error(name) << "dimension " << dim << " (" << dims[dim]
                       << ") must be positive";
  if (type.getDimSize(dim) > max)
    return error(name) << "dimension " << dim << " (" << dims[dim] << " = "
                       << type.getDimSize(dim) << ") must be at most " << max;
  return success();
}

LogicalResult OperandChecker::sameDim(MemRefType a, StringRef aName,
                                      ArrayRef<StringRef> aDims, unsigned aDim,
                                      MemRefType b, StringRef bName,
                                      ArrayRef<StringRef> bDims,
                                      unsigned bDim) {
  if (a.isDynamicDim(aDim) || b.isDynamicDim(bDim))
    return success();
  if (a.getDimSize(aDim) == b.getDimSize(bDim))
    return success();
  return error(bName) << "dimension " << bDim << " (" << bDims[bDim] << " = "
                      << b.getDimSize(bDim) << ") must match dimension " << aDim
                      << " of '" << aName << "' (" << aDims[aDim] << " = "
                      << a.getDimSize(aDim) << ")";
}

LogicalResult OperandChecker::dimEquals(MemRefType type, StringRef name,
                                        ArrayRef<StringRef> dims, unsigned dim,
                                        int64_t expected, StringRef why) {
  if (type.isDynamicDim(dim) || type.getDimSize(dim) == expected)
    return success();
  return error(name) << "dimension " << dim << " (" << dims[dim] << " = "
                     << type.getDimSize(dim) << ") must be " << expected << " ("
                     << why << ")";
}

LogicalResult OperandChecker::scale(Value value, StringRef name) {
  auto type = dyn_cast<MemRefType>(value.getType());
  bool oneElement = type && type.hasStaticShape() &&
                    type.getNumElements() == 1 && type.getRank() <= 1;
  if (!oneElement || !type.getElementType().isF32())
    return error(name) << "must be a one-element f32 memref (memref<f32> or "
                          "memref<1xf32>), got "
                       << value.getType();
  return success();
}

LogicalResult OperandChecker::scaleOrPerSeqHead(Value value, StringRef name,
                                                int64_t kvHeads) {
  static constexpr StringRef dims[] = {"batch", "kv_heads"};
  auto type = dyn_cast<MemRefType>(value.getType());
  if (!type || type.getRank() != 2)
    return scale(value, name);
  if (!type.getElementType().isF32() || !type.isStrided())
    return error(name) << "must be a one-element f32 memref or a strided "
                          "[batch, kv_heads] f32 memref, got "
                       << value.getType();
  return dimEquals(type, name, dims, 1, kvHeads, "one value per KV head");
}

LogicalResult OperandChecker::perHead(Value value, StringRef name,
                                      int64_t heads) {
  static constexpr StringRef dims[] = {"q_heads"};
  MemRefType type = memref(value, name, dims, kF32);
  if (!type)
    return failure();
  return dimEquals(type, name, dims, 0, heads, "one value per query head");
}

LogicalResult OperandChecker::needs(bool present, bool neededPresent,
                                    StringRef name, StringRef needed,
                                    StringRef why) {
  if (!present || neededPresent)
    return success();
  return error(name) << "requires '" << needed << "' (" << why << ")";
}

LogicalResult OperandChecker::sameElem(MemRefType a, StringRef aName,
                                       MemRefType b, StringRef bName) {
  if (a.getElementType() == b.getElementType())
    return success();
  return error(bName) << "must have the element type of '" << aName << "' ("
                      << a.getElementType() << "), got " << b.getElementType();
}

LogicalResult OperandChecker::sameShape(MemRefType a, StringRef aName,
                                        MemRefType b, StringRef bName,
                                        ArrayRef<StringRef> dims) {
  for (unsigned d = 0, e = dims.size(); d < e; ++d)
    if (failed(sameDim(a, aName, dims, d, b, bName, dims, d)))
      return failure();
  return success();
}

LogicalResult mlir::attn::detail::verifyOperandSegments(
    Operation *op, ArrayRef<int32_t> sizes, ArrayRef<StringRef> groups) {
  if (sizes.size() != groups.size())
    return op->emitOpError() << "has " << sizes.size()
                             << " operand segments, expected " << groups.size();
  for (auto [size, group] : llvm::zip_equal(sizes, groups)) {
    bool optional = group.ends_with("?");
    if (size == 1 || (optional && size == 0))
      continue;
    return op->emitOpError()
           << "operand '" << group.drop_back(optional ? 1 : 0) << "' "
           << (optional ? "takes 0 or 1 value" : "requires exactly 1 value")
           << ", but 'operandSegmentSizes' gives it " << size;
  }
  return success();
}

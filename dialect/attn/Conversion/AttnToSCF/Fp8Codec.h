//===- Fp8Codec.h - exact fp8 <-> f32 conversion in arith ops ---*- C++ -*-===//
//
// LLVM has no fp8 types, so fp8 values travel as i8 and are converted with
// integer arithmetic: exact decoding, and round-to-nearest-even encoding that
// saturates to the largest finite value (docs/semantics.md, section 6).
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_CONVERSION_ATTNTOSCF_FP8CODEC_H
#define ATTN_CONVERSION_ATTNTOSCF_FP8CODEC_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::attn {

/// Decodes the i8 bit pattern `bits` of fp8 type `fp8Type` to f32.
Value emitFp8ToF32(ImplicitLocOpBuilder &b, Type fp8Type, Value bits);

/// Encodes the f32 `value` as fp8 type `fp8Type`: clamps to +-max finite,
/// rounds to nearest even, returns the i8 bit pattern.
Value emitF32ToFp8(ImplicitLocOpBuilder &b, Type fp8Type, Value value);

/// The largest finite value of `fp8Type`.
double fp8MaxFinite(Type fp8Type);

} // namespace mlir::attn

#endif // ATTN_CONVERSION_ATTNTOSCF_FP8CODEC_H

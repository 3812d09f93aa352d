//===- Fp8Codec.h - exact fp8 <-> f32 conversion in arith ops ---*- C++ -*-===//
//
// LLVM has no fp8 types, so fp8 values travel as i8 and are converted with
// integer arithmetic: exact decoding, and round-to-nearest-even encoding that
// saturates to the largest finite value (docs/semantics.md, section 6).
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_LIB_TRANSFORMS_FP8CODEC_H
#define ATTN_LIB_TRANSFORMS_FP8CODEC_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::attn {

/// Decodes the i8 bit pattern `bits` of fp8 type `fp8Type` to f32.
Value emitFp8ToF32(ImplicitLocOpBuilder &b, Type fp8Type, Value bits);

/// Encodes the f32 `value` as fp8 type `fp8Type`: clamps to +-max finite,
/// rounds to nearest even, returns the i8 bit pattern.
Value emitF32ToFp8(ImplicitLocOpBuilder &b, Type fp8Type, Value value);

/// The largest finite value of `fp8Type`.
double fp8MaxFinite(Type fp8Type);

/// Triton's `tl.rand(seed, offset)`: Philox-4x32-10 keyed by the i64 `seed`,
/// counter (low 32 bits of the i64 `offset`, 0, 0, 0), first word mapped to
/// [0, 1) as f32 (docs/semantics.md, section 7).
Value emitPhiloxUniform(ImplicitLocOpBuilder &b, Value seed, Value offset);

} // namespace mlir::attn

#endif // ATTN_LIB_TRANSFORMS_FP8CODEC_H

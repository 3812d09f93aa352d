//===- Philox.h - Triton's tl.rand in arith ops -----------------*- C++ -*-===//
//
// The dropout randomness of attn.flash (docs/semantics.md, section 7).
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_CONVERSION_ATTNTOSCF_PHILOX_H
#define ATTN_CONVERSION_ATTNTOSCF_PHILOX_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::attn {

class LoopEmitter;

/// Triton's `tl.rand(seed, offset)`: Philox-4x32-10 keyed by the i64 `seed`,
/// counter (low 32 bits of the i64 `offset`, 0, 0, 0), first word mapped to
/// [0, 1) as f32 (docs/semantics.md, section 7). Multiplies through
/// `e.mulHiU32`.
Value emitPhiloxUniform(LoopEmitter &e, Value seed, Value offset);

} // namespace mlir::attn

#endif // ATTN_CONVERSION_ATTNTOSCF_PHILOX_H

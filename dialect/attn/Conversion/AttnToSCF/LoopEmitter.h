//===- LoopEmitter.h - terse emission of scalar loop code -------*- C++ -*-===//
//
// A thin layer over ImplicitLocOpBuilder for the loop nests the attn
// lowerings emit: index/float arithmetic, counted loops and guards whose
// bodies are C++ lambdas, and element loads/stores that widen to f32.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_CONVERSION_ATTNTOSCF_LOOPEMITTER_H
#define ATTN_CONVERSION_ATTNTOSCF_LOOPEMITTER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <functional>

namespace mlir::attn {

/// ln 2 and log2 e: the softmax runs in base 2 (exp2, log2), and its
/// natural-log results (lse, segment maxima) convert back.
inline constexpr double kLn2 = 0.6931471805599453;
inline constexpr double kLog2e = 1.4426950408889634;

class LoopEmitter {
public:
  explicit LoopEmitter(ImplicitLocOpBuilder &b) : b(b) {}

  ImplicitLocOpBuilder &builder() { return b; }

  // Constants.
  Value idx(int64_t v);
  Value f32(double v);
  Value negInf() { return f32(-std::numeric_limits<double>::infinity()); }

  // Index arithmetic.
  Value add(Value x, Value y);
  Value sub(Value x, Value y);
  Value mul(Value x, Value y);
  Value divU(Value x, Value y);
  Value remU(Value x, Value y);
  Value ceilDiv(Value x, Value y);
  Value min(Value x, Value y);
  Value max(Value x, Value y);
  Value cmp(arith::CmpIPredicate pred, Value x, Value y);
  Value lt(Value x, Value y) { return cmp(arith::CmpIPredicate::slt, x, y); }
  Value le(Value x, Value y) { return cmp(arith::CmpIPredicate::sle, x, y); }
  Value eq(Value x, Value y) { return cmp(arith::CmpIPredicate::eq, x, y); }
  Value andI(Value x, Value y);
  Value orI(Value x, Value y);
  Value notI(Value x);
  Value select(Value cond, Value x, Value y);
  /// An i32 or index value as index.
  Value toIndex(Value v);
  /// 32-bit integers, for GPU address and mask arithmetic (index is 64-bit
  /// there: twice the instructions): a constant, and an index as i32
  /// (`isSigned`: of a value that may be negative).
  Value i32(int64_t v);
  Value toI32(Value index, bool isSigned = true);
  /// An index as f32 (signed).
  Value indexToF32(Value v);

  // f32 arithmetic.
  Value addF(Value x, Value y);
  Value subF(Value x, Value y);
  Value mulF(Value x, Value y);
  Value divF(Value x, Value y);
  Value maxF(Value x, Value y);
  Value minF(Value x, Value y);
  Value cmpF(arith::CmpFPredicate pred, Value x, Value y);
  Value exp2(Value x);
  Value log2(Value x);
  Value sqrt(Value x);
  /// 1 / x: the target's reciprocal instruction where it set one (setRcp),
  /// else a division.
  Value rcp(Value x);
  /// c * tanh(a * x) (softcap). With libm, math.tanh; on GPUs (setExp2)
  /// c - 2c / (exp2(2 a log2(e) x) + 1): one multiply, exp2, add,
  /// reciprocal and fma an element (the factors are per program), no overflow
  /// (exp2 saturates to inf, whose reciprocal is 0) and no NaN of its own.
  Value scaledTanh(Value x, Value a, Value c);
  /// The high 32 bits of the 64-bit product of unsigned i32 values: the
  /// target's instruction where it set one (setMulHiU32), else a 64-bit
  /// multiply (which LLVM's instcombine leaves in 64 bits on NVPTX). A
  /// hook that returns null takes the multiply too.
  Value mulHiU32(Value x, Value y);

  /// Targets without libm (GPUs) route the transcendental functions to their
  /// hardware instructions; tanh is then built from exp2 and rcp.
  void setExp2(std::function<Value(ImplicitLocOpBuilder &, Value)> fn) {
    exp2Fn = std::move(fn);
  }
  void setRcp(std::function<Value(ImplicitLocOpBuilder &, Value)> fn) {
    rcpFn = std::move(fn);
  }
  void setSqrt(std::function<Value(ImplicitLocOpBuilder &, Value)> fn) {
    sqrtFn = std::move(fn);
  }
  void setLog2(std::function<Value(ImplicitLocOpBuilder &, Value)> fn) {
    log2Fn = std::move(fn);
  }
  void
  setMulHiU32(std::function<Value(ImplicitLocOpBuilder &, Value, Value)> fn) {
    mulHiFn = std::move(fn);
  }

  // Control flow. Bodies run with the insertion point inside the region.
  void forLoop(Value lo, Value hi, Value step,
               llvm::function_ref<void(Value)> body);
  void forLoop(Value lo, Value hi, llvm::function_ref<void(Value)> body) {
    forLoop(lo, hi, idx(1), body);
  }
  void forLoop(int64_t lo, int64_t hi, llvm::function_ref<void(Value)> body) {
    forLoop(idx(lo), idx(hi), idx(1), body);
  }
  void ifThen(Value cond, llvm::function_ref<void()> then);
  void ifThenElse(Value cond, llvm::function_ref<void()> then,
                  llvm::function_ref<void()> otherwise);
  /// An scf.if yielding values of `types`: those of `then` or `otherwise`.
  SmallVector<Value> ifElse(Value cond, TypeRange types,
                            llvm::function_ref<SmallVector<Value>()> then,
                            llvm::function_ref<SmallVector<Value>()> otherwise);
  /// An i1 constant.
  Value boolean(bool v);
  /// A loop carrying one value: returns body(iv, acc) folded over [lo, hi).
  Value reduce(Value lo, Value hi, Value init,
               llvm::function_ref<Value(Value, Value)> body);
  Value reduce(int64_t lo, int64_t hi, Value init,
               llvm::function_ref<Value(Value, Value)> body) {
    return reduce(idx(lo), idx(hi), init, body);
  }
  /// A loop while `cond(state)` holds: `cond` returns the condition and
  /// the values `body` receives (of the state's types), `body` the next
  /// state; returns the values `cond` passed last.
  SmallVector<Value> whileLoop(
      ValueRange inits,
      llvm::function_ref<std::pair<Value, SmallVector<Value>>(ValueRange)> cond,
      llvm::function_ref<SmallVector<Value>(ValueRange)> body);
  /// A loop carrying several values: body(iv, accs) returns the next ones.
  SmallVector<Value>
  reduceN(Value lo, Value hi, ValueRange inits,
          llvm::function_ref<SmallVector<Value>(Value, ValueRange)> body);
  /// Runs `body` with f32 scratch buffers of the given shapes that live
  /// exactly as long as the body (allocated before, freed after). Heap
  /// buffers rather than allocas: an alloca in a loop body would grow the
  /// stack every iteration once the loops are lowered.
  void withBuffers(ArrayRef<SmallVector<int64_t>> shapes,
                   llvm::function_ref<void(ArrayRef<Value>)> body);

  // Memory. `load32` widens any supported element type to f32 (fp8 through
  // the exact decoder, i8 exactly), optionally multiplying by a
  // dequantization scale. With `quantize` (an fp8 type) a value of another
  // type is first quantized with that scale, as vLLM's wrappers do before
  // their launch: round(x * (1 / scale)) in x's own type, encoded as
  // `quantize` (saturating), then dequantized.
  Value load(Value memref, ValueRange indices);
  void store(Value value, Value memref, ValueRange indices);
  Value loadIndex(Value memref, ValueRange indices);
  Value load32(Value memref, ValueRange indices, Value scale = nullptr,
               Type quantize = nullptr);
  /// The f32 value `v` of element type `t` quantized as load32 describes.
  Value quantizeFp8(Value v, Type t, Value scale, Type quantize);
  /// Rounds an f32 to `elementType` and stores it (fp8: saturating encoder).
  void storeFrom32(Value value, Value memref, ValueRange indices);
  /// Stores a final output element (already multiplied by 1 / out_scale
  /// when `outScaled`). Like vLLM's kernels, an output scale clamps to the
  /// f8E4M3FN range whatever out's type; fp8 stores saturate anyway.
  void storeOutput(Value value, Value memref, ValueRange indices,
                   bool outScaled);
  /// Reads a one-element scale memref (memref<f32> or memref<1xf32>).
  Value loadScalar(Value memref);

private:
  ImplicitLocOpBuilder &b;
  std::function<Value(ImplicitLocOpBuilder &, Value)> exp2Fn, sqrtFn, log2Fn,
      rcpFn;
  std::function<Value(ImplicitLocOpBuilder &, Value, Value)> mulHiFn;
};

} // namespace mlir::attn

#endif // ATTN_CONVERSION_ATTNTOSCF_LOOPEMITTER_H

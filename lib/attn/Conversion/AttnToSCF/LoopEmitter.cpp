//===- LoopEmitter.cpp - terse emission of scalar loop code -----*- C++ -*-===//

#include "attn/Conversion/AttnToSCF/LoopEmitter.h"
#include "attn/Conversion/AttnToSCF/Fp8Codec.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mlir::attn;

Value LoopEmitter::idx(int64_t v) {
  return arith::ConstantIndexOp::create(b, v);
}
Value LoopEmitter::f32(double v) {
  return arith::ConstantOp::create(b, b.getF32FloatAttr(v));
}

Value LoopEmitter::add(Value x, Value y) {
  return arith::AddIOp::create(b, x, y);
}
Value LoopEmitter::sub(Value x, Value y) {
  return arith::SubIOp::create(b, x, y);
}
Value LoopEmitter::mul(Value x, Value y) {
  return arith::MulIOp::create(b, x, y);
}
Value LoopEmitter::divU(Value x, Value y) {
  return arith::DivUIOp::create(b, x, y);
}
Value LoopEmitter::remU(Value x, Value y) {
  return arith::RemUIOp::create(b, x, y);
}
Value LoopEmitter::ceilDiv(Value x, Value y) {
  return arith::CeilDivSIOp::create(b, x, y);
}
Value LoopEmitter::min(Value x, Value y) {
  return arith::MinSIOp::create(b, x, y);
}
Value LoopEmitter::max(Value x, Value y) {
  return arith::MaxSIOp::create(b, x, y);
}
Value LoopEmitter::cmp(arith::CmpIPredicate pred, Value x, Value y) {
  return arith::CmpIOp::create(b, pred, x, y);
}
Value LoopEmitter::orI(Value x, Value y) {
  return arith::OrIOp::create(b, x, y);
}
Value LoopEmitter::notI(Value x) {
  return arith::XOrIOp::create(b, x, boolean(true));
}
Value LoopEmitter::andI(Value x, Value y) {
  return arith::AndIOp::create(b, x, y);
}
Value LoopEmitter::select(Value cond, Value x, Value y) {
  return arith::SelectOp::create(b, cond, x, y);
}
Value LoopEmitter::toIndex(Value v) {
  if (v.getType().isIndex())
    return v;
  return arith::IndexCastOp::create(b, b.getIndexType(), v);
}
Value LoopEmitter::indexToF32(Value v) {
  Value i64v = arith::IndexCastOp::create(b, b.getI64Type(), v);
  return arith::SIToFPOp::create(b, b.getF32Type(), i64v);
}

Value LoopEmitter::addF(Value x, Value y) {
  return arith::AddFOp::create(b, x, y);
}
Value LoopEmitter::subF(Value x, Value y) {
  return arith::SubFOp::create(b, x, y);
}
Value LoopEmitter::mulF(Value x, Value y) {
  return arith::MulFOp::create(b, x, y);
}
Value LoopEmitter::divF(Value x, Value y) {
  return arith::DivFOp::create(b, x, y);
}
Value LoopEmitter::maxF(Value x, Value y) {
  return arith::MaximumFOp::create(b, x, y);
}
Value LoopEmitter::minF(Value x, Value y) {
  return arith::MinimumFOp::create(b, x, y);
}
Value LoopEmitter::cmpF(arith::CmpFPredicate pred, Value x, Value y) {
  return arith::CmpFOp::create(b, pred, x, y);
}
Value LoopEmitter::exp2(Value x) {
  return exp2Fn ? exp2Fn(b, x) : math::Exp2Op::create(b, x).getResult();
}
Value LoopEmitter::log2(Value x) {
  return log2Fn ? log2Fn(b, x) : math::Log2Op::create(b, x).getResult();
}
Value LoopEmitter::sqrt(Value x) {
  return sqrtFn ? sqrtFn(b, x) : math::SqrtOp::create(b, x).getResult();
}
Value LoopEmitter::rcp(Value x) {
  return rcpFn ? rcpFn(b, x) : divF(f32(1.0), x);
}
Value LoopEmitter::mulHiU32(Value x, Value y) {
  if (mulHiFn)
    if (Value hi = mulHiFn(b, x, y))
      return hi;
  Type i64 = b.getI64Type();
  Value p = arith::MulIOp::create(b, arith::ExtUIOp::create(b, i64, x),
                                  arith::ExtUIOp::create(b, i64, y));
  Value shift = arith::ConstantOp::create(b, b.getI64IntegerAttr(32));
  return arith::TruncIOp::create(b, b.getI32Type(),
                                 arith::ShRUIOp::create(b, p, shift));
}
Value LoopEmitter::scaledTanh(Value x, Value a, Value c) {
  if (!exp2Fn)
    return mulF(math::TanhOp::create(b, mulF(x, a)), c);
  // tanh(y) = 1 - 2 / (exp(2y) + 1). Plain arith and the target's exp2 and
  // reciprocal: GPU targets would turn math.tanh, absf or copysign into
  // device-library calls, and an IEEE division into a dozen instructions.
  // Near y = 0 the subtraction cancels to an absolute error of a few ulp
  // of c, which is what the scores' softmax sees.
  Value t = exp2(mulF(x, mulF(a, f32(2.0 * kLog2e))));
  Value r = rcp(addF(t, f32(1.0)));
  // c - 2c r as one fma (llvm.intr.fma: math.fma would become a device
  // library call, and a multiply and a subtraction stay two instructions).
  Value minus2c = mulF(c, f32(-2.0));
  return LLVM::FMAOp::create(b, r, minus2c, c);
}

void LoopEmitter::forLoop(Value lo, Value hi, Value step,
                          llvm::function_ref<void(Value)> body) {
  auto loop = scf::ForOp::create(b, lo, hi, step);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(loop.getBody()->getTerminator());
  body(loop.getInductionVar());
}

void LoopEmitter::ifThen(Value cond, llvm::function_ref<void()> then) {
  auto ifOp = scf::IfOp::create(b, cond, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  then();
}

void LoopEmitter::ifThenElse(Value cond, llvm::function_ref<void()> then,
                             llvm::function_ref<void()> otherwise) {
  auto ifOp = scf::IfOp::create(b, cond, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  then();
  b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
  otherwise();
}

SmallVector<Value>
LoopEmitter::ifElse(Value cond, TypeRange types,
                    llvm::function_ref<SmallVector<Value>()> then,
                    llvm::function_ref<SmallVector<Value>()> otherwise) {
  auto ifOp = scf::IfOp::create(b, types, cond, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    scf::YieldOp::create(b, then());
    b.setInsertionPointToStart(ifOp.elseBlock());
    scf::YieldOp::create(b, otherwise());
  }
  return SmallVector<Value>(ifOp.getResults());
}

Value LoopEmitter::boolean(bool v) {
  return arith::ConstantOp::create(b, b.getBoolAttr(v));
}

Value LoopEmitter::reduce(Value lo, Value hi, Value init,
                          llvm::function_ref<Value(Value, Value)> body) {
  auto loop = scf::ForOp::create(b, lo, hi, idx(1), ValueRange{init});
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(loop.getBody());
  Value next = body(loop.getInductionVar(), loop.getRegionIterArgs()[0]);
  scf::YieldOp::create(b, next);
  return loop.getResult(0);
}

SmallVector<Value> LoopEmitter::reduceN(
    Value lo, Value hi, ValueRange inits,
    llvm::function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  auto loop = scf::ForOp::create(b, lo, hi, idx(1), inits);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(loop.getBody());
    SmallVector<Value> next =
        body(loop.getInductionVar(), loop.getRegionIterArgs());
    scf::YieldOp::create(b, next);
  }
  return SmallVector<Value>(loop.getResults());
}

Value LoopEmitter::i32(int64_t v) {
  return arith::ConstantIntOp::create(b, b.getI32Type(), v);
}

Value LoopEmitter::toI32(Value index, bool isSigned) {
  if (isSigned)
    return arith::IndexCastOp::create(b, b.getI32Type(), index);
  return arith::IndexCastUIOp::create(b, b.getI32Type(), index);
}

SmallVector<Value> LoopEmitter::whileLoop(
    ValueRange inits,
    llvm::function_ref<std::pair<Value, SmallVector<Value>>(ValueRange)> cond,
    llvm::function_ref<SmallVector<Value>(ValueRange)> body) {
  SmallVector<Type> types(inits.getTypes());
  SmallVector<Location> locs(types.size(), b.getLoc());
  // (The loop's results are the values `cond` passes: of the state's
  // types.)
  auto loop = scf::WhileOp::create(b, types, inits);
  OpBuilder::InsertionGuard guard(b);
  Block *before = b.createBlock(&loop.getBefore(), {}, types, locs);
  auto [go, passed] = cond(before->getArguments());
  scf::ConditionOp::create(b, go, passed);
  SmallVector<Type> passedTypes(ValueRange(passed).getTypes());
  SmallVector<Location> passedLocs(passedTypes.size(), b.getLoc());
  Block *after = b.createBlock(&loop.getAfter(), {}, passedTypes, passedLocs);
  scf::YieldOp::create(b, body(after->getArguments()));
  return SmallVector<Value>(loop.getResults());
}

void LoopEmitter::withBuffers(ArrayRef<SmallVector<int64_t>> shapes,
                              llvm::function_ref<void(ArrayRef<Value>)> body) {
  SmallVector<Value> buffers;
  for (ArrayRef<int64_t> shape : shapes)
    buffers.push_back(
        memref::AllocOp::create(b, MemRefType::get(shape, b.getF32Type())));
  body(buffers);
  for (Value buffer : buffers)
    memref::DeallocOp::create(b, buffer);
}

Value LoopEmitter::load(Value memref, ValueRange indices) {
  return memref::LoadOp::create(b, memref, indices);
}
void LoopEmitter::store(Value value, Value memref, ValueRange indices) {
  memref::StoreOp::create(b, value, memref, indices);
}
Value LoopEmitter::loadIndex(Value memref, ValueRange indices) {
  return toIndex(load(memref, indices));
}

Value LoopEmitter::load32(Value memref, ValueRange indices, Value scale,
                          Type quantize) {
  Value v = load(memref, indices);
  Type t = v.getType();
  if (t.isF32()) {
    // Nothing to widen.
  } else if (t.isF16() || t.isBF16()) {
    v = arith::ExtFOp::create(b, b.getF32Type(), v);
  } else if (t.isSignlessInteger(8)) {
    v = arith::SIToFPOp::create(b, b.getF32Type(), v);
  } else {
    Value bits = arith::BitcastOp::create(b, b.getI8Type(), v);
    v = emitFp8ToF32(b, t, bits);
  }
  if (quantize && t != quantize)
    v = quantizeFp8(v, t, scale, quantize);
  return scale ? mulF(v, scale) : v;
}

Value LoopEmitter::quantizeFp8(Value v, Type t, Value scale, Type quantize) {
  // x * (1 / s), rounded to x's own type as torch computes it.
  Value x = mulF(v, divF(f32(1.0), scale));
  if (!t.isF32())
    x = arith::ExtFOp::create(b, b.getF32Type(),
                              arith::TruncFOp::create(b, t, x).getResult());
  return emitFp8ToF32(b, quantize, emitF32ToFp8(b, quantize, x));
}

void LoopEmitter::storeFrom32(Value value, Value memref, ValueRange indices) {
  Type t = cast<MemRefType>(memref.getType()).getElementType();
  if (t.isF16() || t.isBF16()) {
    value = arith::TruncFOp::create(b, t, value);
  } else if (!t.isF32()) {
    Value bits = emitF32ToFp8(b, t, value);
    value = arith::BitcastOp::create(b, t, bits);
  }
  store(value, memref, indices);
}

void LoopEmitter::storeOutput(Value value, Value memref, ValueRange indices,
                              bool outScaled) {
  Type t = cast<MemRefType>(memref.getType()).getElementType();
  if (outScaled && (t.isF32() || t.isF16() || t.isBF16())) {
    constexpr double kE4M3Max = 448.0;
    value = maxF(minF(value, f32(kE4M3Max)), f32(-kE4M3Max));
  }
  storeFrom32(value, memref, indices);
}

Value LoopEmitter::loadScalar(Value memref) {
  auto type = cast<MemRefType>(memref.getType());
  SmallVector<Value> zeros(type.getRank(), idx(0));
  return load(memref, zeros);
}

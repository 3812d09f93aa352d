//===- Philox.cpp - Triton's tl.rand in arith ops
//--------------------------===//

#include "attn/Conversion/AttnToSCF/Philox.h"

#include "attn/Conversion/AttnToSCF/LoopEmitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::attn;

namespace {
Value c32(ImplicitLocOpBuilder &b, int64_t v) {
  return arith::ConstantOp::create(b, b.getI32IntegerAttr(v));
}
Value cf(ImplicitLocOpBuilder &b, double v) {
  return arith::ConstantOp::create(b, b.getF32FloatAttr(v));
}
} // namespace

Value mlir::attn::emitPhiloxUniform(LoopEmitter &e, Value seed, Value offset) {
  ImplicitLocOpBuilder &b = e.builder();
  Type i32 = b.getI32Type();
  auto c64 = [&](int64_t v) {
    return arith::ConstantOp::create(b, b.getI64IntegerAttr(v));
  };
  auto lo32 = [&](Value v64) { return arith::TruncIOp::create(b, i32, v64); };
  // 32x32 -> 64-bit product of unsigned words as (hi, lo), each in 32 bits
  // (from one 64-bit product, instcombine moved the next round's xors into
  // 64 bits as well).
  auto mulHiLo = [&](uint32_t a, Value x) {
    if (matchPattern(x, m_Zero())) // the first round's zero words
      return std::pair<Value, Value>{x, x};
    Value m = c32(b, static_cast<int32_t>(a));
    return std::pair<Value, Value>{e.mulHiU32(x, m),
                                   arith::MulIOp::create(b, x, m)};
  };
  Value k0 = lo32(seed);
  Value k1 = lo32(arith::ShRUIOp::create(b, seed, c64(32)));
  Value c0 = lo32(offset), c1 = c32(b, 0), c2 = c32(b, 0), c3 = c32(b, 0);
  for (int round = 0; round < 10; ++round) {
    auto [hiA, loA] = mulHiLo(0xD2511F53u, c0);
    auto [hiB, loB] = mulHiLo(0xCD9E8D57u, c2);
    Value n0 = arith::XOrIOp::create(b, arith::XOrIOp::create(b, hiB, c1), k0);
    Value n2 = arith::XOrIOp::create(b, arith::XOrIOp::create(b, hiA, c3), k1);
    c0 = n0;
    c1 = loB;
    c2 = n2;
    c3 = loA;
    k0 =
        arith::AddIOp::create(b, k0, c32(b, static_cast<int32_t>(0x9E3779B9u)));
    k1 =
        arith::AddIOp::create(b, k1, c32(b, static_cast<int32_t>(0xBB67AE85u)));
  }
  // uint_to_uniform_float: reinterpret as i32, fold negatives, scale by 2^-31.
  Value isNeg =
      arith::CmpIOp::create(b, arith::CmpIPredicate::slt, c0, c32(b, 0));
  Value folded = arith::SelectOp::create(
      b, isNeg, arith::SubIOp::create(b, c32(b, -1), c0), c0);
  return arith::MulFOp::create(
      b, arith::SIToFPOp::create(b, b.getF32Type(), folded),
      cf(b, 4.6566127342e-10));
}

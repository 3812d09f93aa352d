//===- Fp8Codec.cpp - exact fp8 <-> f32 conversion in arith ops -*- C++ -*-===//

#include "attn/Conversion/AttnToSCF/Fp8Codec.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <cmath>

using namespace mlir;
using namespace mlir::attn;

namespace {
/// The fields of the two fp8 formats.
struct Fp8Format {
  int expBits, mantBits, bias;
  bool ieeeSpecials; // e5m2: exponent all-ones is inf/NaN; e4m3fn: only
                     // S.1111.111 is NaN
};

Fp8Format formatOf(Type t) {
  if (isa<Float8E5M2Type>(t))
    return {5, 2, 15, true};
  return {4, 3, 7, false}; // f8E4M3FN
}

Value c32(ImplicitLocOpBuilder &b, int64_t v) {
  return arith::ConstantOp::create(b, b.getI32IntegerAttr(v));
}
Value cf(ImplicitLocOpBuilder &b, double v) {
  return arith::ConstantOp::create(b, b.getF32FloatAttr(v));
}
} // namespace

double mlir::attn::fp8MaxFinite(Type t) {
  return isa<Float8E5M2Type>(t) ? 57344.0 : 448.0;
}

Value mlir::attn::emitFp8ToF32(ImplicitLocOpBuilder &b, Type fp8Type,
                               Value bits) {
  Fp8Format f = formatOf(fp8Type);
  Value x = arith::ExtUIOp::create(b, b.getI32Type(), bits);
  Value sign = arith::ShLIOp::create(b, arith::ShRUIOp::create(b, x, c32(b, 7)),
                                     c32(b, 31));
  Value e =
      arith::AndIOp::create(b, arith::ShRUIOp::create(b, x, c32(b, f.mantBits)),
                            c32(b, (1 << f.expBits) - 1));
  Value m = arith::AndIOp::create(b, x, c32(b, (1 << f.mantBits) - 1));

  // Normal: rebias the exponent and left-align the mantissa in f32.
  Value normalBits = arith::OrIOp::create(
      b,
      arith::OrIOp::create(
          b, sign,
          arith::ShLIOp::create(
              b, arith::AddIOp::create(b, e, c32(b, 127 - f.bias)),
              c32(b, 23))),
      arith::ShLIOp::create(b, m, c32(b, 23 - f.mantBits)));
  Value normal = arith::BitcastOp::create(b, b.getF32Type(), normalBits);
  // Subnormal: m * 2^(1 - bias - mantBits), with the sign.
  Value mag =
      arith::MulFOp::create(b, arith::UIToFPOp::create(b, b.getF32Type(), m),
                            cf(b, std::ldexp(1.0, 1 - f.bias - f.mantBits)));
  Value subnormal = arith::BitcastOp::create(
      b, b.getF32Type(),
      arith::OrIOp::create(b, sign,
                           arith::BitcastOp::create(b, b.getI32Type(), mag)));
  Value isSub =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, e, c32(b, 0));
  Value value = arith::SelectOp::create(b, isSub, subnormal, normal);

  // Specials.
  Value nan = cf(b, std::nan(""));
  int64_t expMax = (1 << f.expBits) - 1;
  Value eMax =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, e, c32(b, expMax));
  if (f.ieeeSpecials) {
    Value inf = arith::BitcastOp::create(
        b, b.getF32Type(), arith::OrIOp::create(b, sign, c32(b, 0x7f800000)));
    Value mZero =
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, m, c32(b, 0));
    Value special = arith::SelectOp::create(b, mZero, inf, nan);
    value = arith::SelectOp::create(b, eMax, special, value);
  } else {
    Value mAll = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, m,
                                       c32(b, (1 << f.mantBits) - 1));
    value = arith::SelectOp::create(b, arith::AndIOp::create(b, eMax, mAll),
                                    nan, value);
  }
  return value;
}

Value mlir::attn::emitF32ToFp8(ImplicitLocOpBuilder &b, Type fp8Type,
                               Value value) {
  Fp8Format f = formatOf(fp8Type);
  Value bitsIn = arith::BitcastOp::create(b, b.getI32Type(), value);
  Value sign = arith::ShRUIOp::create(b, bitsIn, c32(b, 31));
  // |value| by clearing the sign bit, and round-half-even below by the
  // 2^23 trick: plain arith, so GPU targets need no device library.
  Value magnitude = arith::BitcastOp::create(
      b, b.getF32Type(), arith::AndIOp::create(b, bitsIn, c32(b, 0x7fffffff)));
  Value a =
      arith::MinimumFOp::create(b, magnitude, cf(b, fp8MaxFinite(fp8Type)));

  // Subnormal range: round a / 2^(1 - bias - mantBits) to an integer.
  Value scaled = arith::MulFOp::create(
      b, a, cf(b, std::ldexp(1.0, f.bias - 1 + f.mantBits)));
  // (x + 2^23) - 2^23 rounds 0 <= x < 2^23 to the nearest even integer; the
  // subnormal range needs only x < 2^(mantBits + 1).
  Value twoP23 = cf(b, 8388608.0);
  Value roundedScaled = arith::SubFOp::create(
      b, arith::AddFOp::create(b, scaled, twoP23), twoP23);
  Value subCode = arith::FPToUIOp::create(
      b, b.getI32Type(), arith::MinimumFOp::create(b, roundedScaled, twoP23));
  // Normal range: round the f32 mantissa to mantBits (nearest even), rebias.
  int shift = 23 - f.mantBits;
  Value u = arith::BitcastOp::create(b, b.getI32Type(), a);
  Value odd = arith::AndIOp::create(
      b, arith::ShRUIOp::create(b, u, c32(b, shift)), c32(b, 1));
  Value rounded = arith::AddIOp::create(
      b, arith::AddIOp::create(b, u, c32(b, (1 << (shift - 1)) - 1)), odd);
  Value normalCode = arith::SubIOp::create(
      b, arith::ShRUIOp::create(b, rounded, c32(b, shift)),
      c32(b, (127 - f.bias) << f.mantBits));
  Value isSub = arith::CmpFOp::create(b, arith::CmpFPredicate::OLT, a,
                                      cf(b, std::ldexp(1.0, 1 - f.bias)));
  Value code = arith::SelectOp::create(b, isSub, subCode, normalCode);
  code =
      arith::OrIOp::create(b, code, arith::ShLIOp::create(b, sign, c32(b, 7)));
  // NaN in, NaN out (0x7f is NaN in both formats).
  Value isNan =
      arith::CmpFOp::create(b, arith::CmpFPredicate::UNO, value, value);
  code = arith::SelectOp::create(b, isNan, c32(b, 0x7f), code);
  return arith::TruncIOp::create(b, b.getI8Type(), code);
}

//===- WarpTf32.cpp - f32 programs on tf32 tensor cores -------------------===//
//
// The tf32 side of the warp program (WarpProgram.h): f32 Q, K and V tiles
// are read like 16-bit ones (an 8x8 b16 matrix of ldmatrix is 8 rows of 4
// f32, and a lane receives row lane / 4, column lane % 4: the tf32 A and B
// fragments of mma.sync.m16n8k8), rounded to tf32 with cvt.rna as they
// become operands, and multiplied with f32 accumulation. With exactF32
// each operand x is split into big = tf32(x) and small = tf32(x - big), and
// a product takes three MMAs (small * big + big * small + big * big,
// 3xTF32), which is about as accurate as f32.
//
//===----------------------------------------------------------------------===//

#include "WarpProgram.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::attn;

namespace mlir::attn::warp {

namespace {
Value toTf32(ImplicitLocOpBuilder &b, Value x) {
  return inlinePtx(b, b.getI32Type(), ValueRange{x}, "cvt.rna.tf32.f32 $0, $1;",
                   "=r,f", /*sideEffects=*/false);
}
} // namespace

Value WarpAttentionBuilder::tf32Operand(Value x) {
  Value big = toTf32(b, x);
  if (!exactF32)
    return big;
  // The tf32 value as an f32 (its low 13 bits cleared), and the tf32 of
  // what it leaves out.
  Value bits = arith::AndIOp::create(
      b, big, arith::ConstantOp::create(b, b.getI32IntegerAttr(~0x1fff)));
  Value bigF = arith::BitcastOp::create(b, b.getF32Type(), bits);
  Value small = toTf32(b, e.subF(x, bigF));
  return vector::FromElementsOp::create(b, VectorType::get({2}, b.getI32Type()),
                                        ValueRange{big, small});
}

WarpAttentionBuilder::Acc WarpAttentionBuilder::mmaTf32(ArrayRef<Value> a,
                                                        ArrayRef<Value> bRegs,
                                                        const Acc &c) {
  Type f32 = b.getF32Type();
  auto resType =
      LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
  auto one = [&](ArrayRef<Value> x, ArrayRef<Value> y, const Acc &acc) {
    SmallVector<Value> operands(x);
    operands.append(y.begin(), y.end());
    operands.append(acc.begin(), acc.end());
    Value res = inlinePtx(
        b, resType, operands,
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {$0, $1, $2, $3}, "
        "{$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};",
        "=f,=f,=f,=f,r,r,r,r,r,r,0,1,2,3", /*sideEffects=*/false);
    Acc out;
    for (int64_t i = 0; i < 4; ++i)
      out[i] = LLVM::ExtractValueOp::create(b, res, i);
    return out;
  };
  if (!exactF32)
    return one(a, bRegs, c);
  auto part = [&](ArrayRef<Value> regs, int64_t i) {
    SmallVector<Value> out;
    for (Value r : regs)
      out.push_back(vector::ExtractOp::create(b, r, i));
    return out;
  };
  SmallVector<Value> aBig = part(a, 0), aSmall = part(a, 1);
  SmallVector<Value> bBig = part(bRegs, 0), bSmall = part(bRegs, 1);
  // The small products first: they are added before the large one rounds.
  Acc acc = one(aSmall, bBig, c);
  acc = one(aBig, bSmall, acc);
  return one(aBig, bBig, acc);
}

void WarpAttentionBuilder::accumulateTf32(const Probabilities &probs,
                                          bool vTransposed,
                                          SmallVector<Acc> &acc) {
  // A of key step j, fragment m: (g, t) = P(g, 2t), (g + 8, t) = P(g + 8,
  // 2t), (g, t + 4) = P(g, 2t + 1), (g + 8, t + 4) = P(g + 8, 2t + 1): the
  // pairs of S tile j as they are (pack(); with exactF32 split here).
  auto element = [&](Value pair, int64_t i) -> Value {
    Value x = vector::ExtractOp::create(b, pair, i);
    return exactF32 ? tf32Operand(x) : x;
  };
  int64_t nTiles = g.nTiles(), dTiles = g.dTiles();
  Value key2t = e.mul(quadCol, e.idx(2));
  for (int64_t j = 0; j < nTiles; ++j) {
    SmallVector<SmallVector<Value>> a;
    for (int64_t m = 0; m < g.mFrags; ++m) {
      Value p0 = probs.p[(m * nTiles + j) * 2],
            p1 = probs.p[(m * nTiles + j) * 2 + 1];
      a.push_back(
          {element(p0, 0), element(p1, 0), element(p0, 1), element(p1, 1)});
    }
    // B: V of keys 8j + 2t and 8j + 2t + 1 at dim 8 dj + g (adjacent in a
    // transposed [D, bn] tile).
    Value key = e.add(e.idx(8 * j), key2t);
    for (int64_t dj = 0; dj < dTiles; ++dj) {
      Value dim = e.add(e.idx(8 * dj), quadRow);
      Value v0, v1;
      if (vTransposed) {
        Value pair =
            vector::LoadOp::create(b, VectorType::get({2}, b.getF32Type()),
                                   cur.vt.mem, ValueRange{dim, key});
        v0 = vector::ExtractOp::create(b, pair, 0);
        v1 = vector::ExtractOp::create(b, pair, 1);
      } else {
        v0 = e.load(cur.v.mem, {key, dim});
        v1 = e.load(cur.v.mem, {e.add(key, e.idx(1)), dim});
      }
      SmallVector<Value> vb = {tf32Operand(v0), tf32Operand(v1)};
      for (int64_t m = 0; m < g.mFrags; ++m) {
        Acc &c = acc[m * dTiles + dj];
        c = mmaTf32(a[m], vb, c);
      }
    }
  }
}

} // namespace mlir::attn::warp

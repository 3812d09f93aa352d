//===- WarpMma.cpp - tensor-core operands and MMAs ------------------------===//
//
// The tensor-core side of the warp program (WarpProgram.h): ldmatrix
// operands and mma.sync m16n8k16, quad reductions, and the wgmma tile step
// (QK and PV groups of m64nNk16 on sm_90a).
//
//===----------------------------------------------------------------------===//

#include "WarpProgram.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::attn;

namespace mlir::attn::warp {

SmallVector<Value> WarpAttentionBuilder::ldmatrix(Value tile, Value row,
                                                  Value col, int numTiles,
                                                  bool transpose) {
  // Each lane receives 32 bits of each 8x8 b16 matrix: a pair, or one f32.
  auto type = VectorType::get({numTiles, 32 / ct.getIntOrFloatBitWidth()}, ct);
  Value m = nvgpu::LdMatrixOp::create(b, type, tile, ValueRange{row, col},
                                      transpose, numTiles);
  SmallVector<Value> regs;
  for (int i = 0; i < numTiles; ++i)
    regs.push_back(operandReg(vector::ExtractOp::create(b, m, i)));
  return regs;
}

/// A pair of 16-bit values (or four fp8) as the i32 register holding it.
static Value asI32(ImplicitLocOpBuilder &b, Value pair) {
  Type i32 = b.getI32Type();
  if (pair.getType() == i32)
    return pair;
  return vector::ExtractOp::create(
      b, vector::BitCastOp::create(b, VectorType::get({1}, i32), pair), 0);
}

Value WarpAttentionBuilder::operandReg(Value pair) {
  // mma.sync takes f16 pairs as vector<2xf16> and bf16 pairs as i32; an
  // f32 (vector<1xf32>) becomes tf32.
  if (ct.isF32())
    return tf32Operand(vector::ExtractOp::create(b, pair, 0));
  return ct.isF16() ? pair : asI32(b, pair);
}

Type WarpAttentionBuilder::pairType() {
  // (fp8 wgmma: four fp8 of P a register, see packP8.)
  if (qgmma)
    return b.getI32Type();
  // (3xTF32 keeps P in f32 until PV splits it: half the registers.)
  if (ct.isF32())
    return VectorType::get({2},
                           exactF32 ? Type(b.getF32Type()) : b.getI32Type());
  return ct.isF16() ? Type(VectorType::get({2}, ct)) : b.getI32Type();
}

Value WarpAttentionBuilder::pack(Value lo, Value hi) {
  if (ct.isF32()) {
    // tf32 registers, or with exactF32 the f32 values (split in PV).
    SmallVector<Value> regs = {lo, hi};
    if (!exactF32)
      regs = {tf32Operand(lo), tf32Operand(hi)};
    return vector::FromElementsOp::create(b, cast<VectorType>(pairType()),
                                          regs);
  }
  // (f16 P of the f16 V tiles of a bf16 program: f16CacheValues.)
  Type type = valueType ? valueType : ct;
  Value pair = vector::FromElementsOp::create(
      b, VectorType::get({2}, type),
      ValueRange{arith::TruncFOp::create(b, type, lo),
                 arith::TruncFOp::create(b, type, hi)});
  return type == ct ? operandReg(pair) : asI32(b, pair);
}

WarpAttentionBuilder::Acc WarpAttentionBuilder::mma(ArrayRef<Value> a,
                                                    ArrayRef<Value> bRegs,
                                                    const Acc &c) {
  if (ct.isF32())
    return mmaTf32(a, bRegs, c);
  Type f32 = b.getF32Type();
  auto resType =
      LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
  NVVM::MMATypes t = ct.isF16() ? NVVM::MMATypes::f16 : NVVM::MMATypes::bf16;
  Value res = NVVM::MmaOp::create(
      b, resType, a, bRegs, ValueRange(c), {16, 8, 16}, std::nullopt,
      std::nullopt, std::array<NVVM::MMATypes, 2>{t, t},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  Acc out;
  for (int64_t i = 0; i < 4; ++i)
    out[i] = LLVM::ExtractValueOp::create(b, res, i);
  return out;
}

WarpAttentionBuilder::Acc WarpAttentionBuilder::mmaFp8(ArrayRef<Value> a,
                                                       ArrayRef<Value> bRegs,
                                                       const Acc &c) {
  auto name = [](Type t) {
    return isa<Float8E4M3FNType>(t) ? std::string("e4m3") : "e5m2";
  };
  Type f32 = b.getF32Type();
  SmallVector<Value> operands;
  for (Value v : llvm::concat<const Value>(a, bRegs))
    operands.push_back(asI32(b, v));
  operands.append(c.begin(), c.end());
  std::string text = "mma.sync.aligned.m16n8k32.row.col.f32." + name(qType) +
                     "." + name(kType) +
                     ".f32 {$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, "
                     "{$10, $11, $12, $13};";
  auto resType =
      LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
  Value res =
      inlinePtx(b, resType, operands, text, "=f,=f,=f,=f,r,r,r,r,r,r,0,1,2,3",
                /*sideEffects=*/false);
  Acc out;
  for (int64_t i = 0; i < 4; ++i)
    out[i] = LLVM::ExtractValueOp::create(b, res, i);
  return out;
}

SmallVector<Value> WarpAttentionBuilder::queryFragment(int64_t m,
                                                       int64_t kStep) {
  if (m < static_cast<int64_t>(qFrags.size()))
    return qFrags[m][kStep];
  // A operand (16x16, row major; tf32: 16x8): matrices (rows 0-7 | 8-15) x
  // (cols 0-7 | 8-15; tf32: 0-3 | 4-7), lane l addressing row l % 8 + 8 *
  // (l / 8 % 2), col 8 * (l / 16) (tf32: 4 * (l / 16)).
  Value row =
      e.add(e.add(warpRow0, e.idx(16 * m)),
            e.add(e.remU(lane, e.idx(8)),
                  e.mul(e.remU(e.divU(lane, e.idx(8)), e.idx(2)), e.idx(8))));
  Value col = e.add(e.idx(kStep * g.kElems()),
                    e.mul(e.divU(lane, e.idx(16)), e.idx(g.chunk)));
  return ldmatrix(qS.mem, row, col, 4, /*transpose=*/false);
}

Value WarpAttentionBuilder::quadReduce(Value x, bool isMax) {
  SmallVector<Value> xs = {x};
  quadReduce(xs, isMax);
  return xs.front();
}

void WarpAttentionBuilder::quadReduce(MutableArrayRef<Value> xs, bool isMax) {
  // Each shuffle step runs over all values before the next one.
  for (int32_t offset : {1, 2}) {
    SmallVector<Value> others;
    for (Value x : xs)
      others.push_back(
          gpu::ShuffleOp::create(b, x, offset, kLanes, gpu::ShuffleMode::XOR)
              .getShuffleResult());
    for (auto [x, other] : llvm::zip(xs, others))
      x = isMax ? e.maxF(x, other) : e.addF(x, other);
  }
}

Value WarpAttentionBuilder::treeReduce(SmallVector<Value> xs, bool isMax) {
  while (xs.size() > 1) {
    SmallVector<Value> next;
    for (size_t i = 0; i + 1 < xs.size(); i += 2)
      next.push_back(isMax ? e.maxF(xs[i], xs[i + 1])
                           : e.addF(xs[i], xs[i + 1]));
    if (xs.size() % 2)
      next.push_back(xs.back());
    xs = std::move(next);
  }
  return xs.front();
}

SmallVector<Value> WarpAttentionBuilder::issueWarpgroupScores(int64_t keyFirst,
                                                              int64_t keys) {
  // A = rows [64 wg, 64 wg + 64) of Q, B = keys [keyFirst, keyFirst + keys)
  // of the K tile, both K-major: k step kk (16 elements, or 32 of fp8) is
  // 32 bytes into atom kk / 4.
  using namespace wgmma;
  Value groupRows = e.mul(e.divU(warp, e.idx(4)), e.idx(kRows * kAtomRowBytes));
  SmallVector<Value> acc;
  fence(b);
  for (int64_t kk = 0; kk < g.dPad / (qgmma ? 32 : 16); ++kk) {
    int64_t atom = kk / 4, within = kk % 4 * 32;
    Value a = descriptor(
        b,
        e.add(tileAddress(qS, atom * g.mRows * kAtomRowBytes + within),
              groupRows),
        16, kGroupBytes);
    // (Core matrices: k step kk is chunk columns 2 kk and 2 kk + 1, a
    // column of the tile's keys 16 bn bytes from the next; 8 keys 128 bytes
    // from the next 8.)
    Value bDesc =
        cur.k.layout == TileLayout::CoreMatrices
            ? descriptor(b, tileAddress(cur.k, (2 * kk * g.bn + keyFirst) * 16),
                         g.bn * 16, 128, Swizzle::None)
            : descriptor(
                  b,
                  tileAddress(cur.k, (atom * g.bn + keyFirst) * kAtomRowBytes +
                                         within),
                  16, kGroupBytes);
    acc = wgmma::mma(b, keys, qgmma ? qType : ct, qgmma ? kType : ct, a, {},
                     bDesc, /*transB=*/false, acc);
  }
  commit(b);
  return acc;
}

SmallVector<WarpAttentionBuilder::Acc>
WarpAttentionBuilder::awaitScores(ArrayRef<Value> pending, int laterGroups) {
  // The accumulators of m64nNk16 are, per warp, those of N / 8 mma.sync
  // m16n8 tiles in order.
  wgmma::wait(b, laterGroups);
  SmallVector<Value> acc = wgmma::fenceOperands(b, pending);
  SmallVector<Acc> s(acc.size() / 4);
  for (size_t j = 0; j < s.size(); ++j)
    for (int64_t i = 0; i < 4; ++i)
      s[j][i] = acc[4 * j + i];
  return s;
}

SmallVector<Value>
WarpAttentionBuilder::issueWarpgroupPV(const Probabilities &probs,
                                       bool vTransposed, int64_t kFirst) {
  // A = P (registers, mma.sync's A layout: key step kk is S tiles 2kk and
  // 2kk + 1). B = V: a [bn, D] tile is N-major (D contiguous), its atoms of
  // 64 dims bn * 128 bytes apart and k step kk 16 rows on; a transposed
  // [D, bn] tile is K-major like K.
  using namespace wgmma;
  rescaleOutput(probs);
  SmallVector<Value> acc;
  for (int64_t dj = 0; dj < g.dTiles(); ++dj)
    for (int64_t i = 0; i < 4; ++i)
      acc.push_back(e.load(oAcc, {accIndex(0, dj, i)}));
  fence(b);
  for (int64_t k = 0; k < static_cast<int64_t>(probs.p.size()) / 4; ++k) {
    int64_t kk = kFirst + k;
    SmallVector<Value> p(probs.p.begin() + 4 * k, probs.p.begin() + 4 * k + 4);
    if (qgmma) {
      // fp8: V^T of the producer (K-major, atoms of 128 keys dPad rows
      // apart: k step kk of 32 keys is 32 bytes into atom kk / 4).
      Value v = descriptor(
          b, tileAddress(cur.vt, kk / 4 * g.dPad * kAtomRowBytes + kk % 4 * 32),
          16, kGroupBytes);
      acc = wgmma::mma(b, g.dPad, vType, vType, Value(), p, v,
                       /*transB=*/false, acc);
      continue;
    }
    Value v =
        !vTransposed
            ? descriptor(b, tileAddress(cur.v, kk * 16 * kAtomRowBytes),
                         g.bn * kAtomRowBytes, kGroupBytes)
        // (32-byte swizzled k steps: step kk is [dPad, 32 bytes], 8 rows
        // 256 bytes from the next 8.)
        : cur.vt.layout == TileLayout::Swizzled32
            ? descriptor(b, tileAddress(cur.vt, kk * g.dPad * 32), 16, 256,
                         Swizzle::Bytes32)
            : descriptor(b,
                         tileAddress(cur.vt, kk / 4 * g.dPad * kAtomRowBytes +
                                                 kk % 4 * 32),
                         16, kGroupBytes);
    Type type = pvType ? pvType : ct;
    acc = wgmma::mma(b, g.dPad, type, type, Value(), p, v,
                     /*transB=*/!vTransposed, acc);
  }
  commit(b);
  return acc;
}

void WarpAttentionBuilder::storeWarpgroupOutput(ArrayRef<Value> pending) {
  wgmma::wait(b, 0);
  SmallVector<Value> acc = wgmma::fenceOperands(b, pending);
  for (int64_t dj = 0; dj < g.dTiles(); ++dj)
    for (int64_t i = 0; i < 4; ++i)
      e.store(acc[4 * dj + i], oAcc, {accIndex(0, dj, i)});
}

void WarpAttentionBuilder::warpgroupTile(const ProgramRows &rows, Value n0,
                                         Value nValid, bool masked,
                                         bool vTransposed) {
  // The tile as two halves of keys, each a step of the online softmax:
  // QK of both halves is issued at once, the softmax of the first half
  // runs under QK of the second, and that of the second under PV of the
  // first. Between an MMA group's issue and its wait the code is
  // straight-line (ptxas serializes MMAs whose registers are in flight
  // across branches: C7518), so the bias path, whose reads branch, runs
  // the tile whole. So do large heads on 64-key tiles: QK of 32-key halves
  // (m64n32) over 256 dims measured slower than the whole tile (H200).
  int64_t half = g.bn / 2;
  if (f.bias || half % 32 || (half < 64 && g.dPad > 64)) {
    Probabilities probs =
        softmax(rows, n0, nValid, masked,
                awaitScores(issueWarpgroupScores(0, g.bn), 0), 0);
    return storeWarpgroupOutput(issueWarpgroupPV(probs, vTransposed, 0));
  }
  SmallVector<Value> first = issueWarpgroupScores(0, half);
  SmallVector<Value> second = issueWarpgroupScores(half, half);
  Probabilities pFirst =
      softmax(rows, n0, nValid, masked, awaitScores(first, 1), 0);
  SmallVector<Acc> sSecond = awaitScores(second, 0);
  SmallVector<Value> o = issueWarpgroupPV(pFirst, vTransposed, 0);
  Probabilities pSecond = softmax(rows, n0, nValid, masked, sSecond, half / 8);
  storeWarpgroupOutput(o);
  storeWarpgroupOutput(issueWarpgroupPV(pSecond, vTransposed, half / 16));
}

} // namespace mlir::attn::warp

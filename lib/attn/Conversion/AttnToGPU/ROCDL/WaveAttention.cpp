//===- WaveAttention.cpp - attention programs on AMD matrix cores ---------===//
//
// The wave program (WaveAttention.h): Q staging, the KV walk, the online
// softmax on transposed accumulators, the epilogue, and the ROCDL backend.
//
//===----------------------------------------------------------------------===//

#include "WaveAttention.h"
#include "attn/Conversion/AttnToGPU/Targets.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::wave;

namespace mlir::attn::wave {

void WaveAttentionBuilder::setUp(const ProgramRows &, ArrayRef<KvWalk>) {
  setUpThreads();
  qS = view(0, g.mRows, g.stride);
  kS = view(g.mRows * g.stride, g.bn, g.stride);
  vtS = view((g.mRows + g.bn) * g.stride, g.dPad, g.vtStride);
}

void WaveAttentionBuilder::stageQuery(const ProgramRows &rows) {
  stager().stage(
      qS,
      [](Value r, Value x) {
        return SmallVector<Value>{r, x};
      },
      g.mRows, g.dPad,
      [&](Value r) { return queryRow(rows, r, /*scaled=*/true); });
  gpu::BarrierOp::create(b);
}

void WaveAttentionBuilder::walkRange(const ProgramRows &rows,
                                     const KvWalk &walk, Value lo, Value hi) {
  // Waves whose rows are all past the tile's tokens stage and synchronize
  // but skip the math.
  Value active = e.lt(waveRow0, e.mul(rows.numTokens, e.idx(shape.pack)));
  Value bn = e.idx(g.bn);
  e.forLoop(lo, hi, bn, [&](Value n0) {
    pinThreadCoordinates();
    Value nValid = e.min(bn, e.sub(hi, n0));
    gpu::BarrierOp::create(b); // every wave is done with the last tile
    stageTile(walk, n0, nValid);
    gpu::BarrierOp::create(b);
    e.ifThen(active, [&] { tile(rows, n0, nValid); });
    unpinThreadCoordinates();
  });
}

void WaveAttentionBuilder::tile(const ProgramRows &rows, Value n0,
                                Value nValid) {
  int64_t nB = g.nBlocks(), nAcc = mc.accElems();
  Type f32 = b.getF32Type();
  auto accType = VectorType::get({nAcc}, f32);
  Value zero = arith::ConstantOp::create(
      b, DenseElementsAttr::get(accType, b.getF32FloatAttr(0.0f)));

  // S^T = K Q^T, 16 keys x 16 rows per block; each K operand is read once
  // per wave for all its fragments.
  SmallVector<Value> s(g.mFrags * nB, zero); // [m * nB + nb]
  for (int64_t kk = 0; kk < g.dBlocks(); ++kk) {
    SmallVector<Value> qOps;
    for (int64_t m = 0; m < g.mFrags; ++m)
      qOps.push_back(operand(qS, rowOf(m), 16 * kk));
    for (int64_t nb = 0; nb < nB; ++nb) {
      Value kOp = operand(kS, e.add(row16, e.idx(16 * nb)), 16 * kk);
      for (int64_t m = 0; m < g.mFrags; ++m)
        s[m * nB + nb] = mma(kOp, qOps[m], s[m * nB + nb]);
    }
    scheduleFence();
  }

  // Scores and masks: each lane holds nB * nAcc keys of its row per
  // fragment. Tiles that no mask crosses skip the mask code; only the
  // scores are in the branch, so that the O update is emitted once.
  int64_t nP = g.mFrags * nB * nAcc;
  auto keyOf = [&](int64_t nb, int64_t j) {
    return e.add(n0, e.add(e.idx(16 * nb), accRow(j)));
  };
  auto scores = [&](bool masked) {
    SmallVector<Value> x(nP);
    for (int64_t m = 0; m < g.mFrags; ++m) {
      Value row = rowOf(m);
      for (int64_t nb = 0; nb < nB; ++nb) {
        for (int64_t j = 0; j < nAcc; ++j) {
          Value key = keyOf(nb, j);
          Value dot = vector::ExtractOp::create(b, s[m * nB + nb], j);
          Value &v = x[(m * nB + nb) * nAcc + j];
          if (!masked) {
            v = math.score(rows, row, key, dot);
            continue;
          }
          Value ok = e.andI(e.lt(e.sub(key, n0), nValid),
                            math.visible(rows, row, key));
          // A bias is read only where the score exists.
          v = f.bias
                  ? e.ifElse(
                        ok, {f32},
                        [&] {
                          return SmallVector<Value>{
                              math.score(rows, row, key, dot)};
                        },
                        [&] { return SmallVector<Value>{e.negInf()}; })[0]
                  : e.select(ok, math.score(rows, row, key, dot), e.negInf());
        }
      }
    }
    return x;
  };
  SmallVector<Value> p;
  if (f.bias) {
    p = scores(true);
  } else {
    Value unmasked =
        e.andI(e.eq(nValid, e.idx(g.bn)),
               math.tileFullyVisible(rows, n0, e.add(n0, e.idx(g.bn))));
    p = e.ifElse(
        unmasked, SmallVector<Type>(nP, f32), [&] { return scores(false); },
        [&] { return scores(true); });
  }

  // The online softmax.
  SmallVector<Value> alpha(g.mFrags);
  for (int64_t m = 0; m < g.mFrags; ++m) {
    Value row = rowOf(m);
    Value tileMax = p[m * nB * nAcc];
    for (int64_t i = 1; i < nB * nAcc; ++i)
      tileMax = e.maxF(tileMax, p[m * nB * nAcc + i]);
    tileMax = rowReduce(tileMax, /*isMax=*/true);
    Value mOld = e.load(mState, {e.idx(m)});
    Value mNew = e.maxF(mOld, tileMax);
    Value mSafe = math.safeMax(mNew);
    alpha[m] = e.exp2(e.subF(mOld, mSafe));
    e.store(mNew, mState, {e.idx(m)});
    Value sum = e.f32(0.0);
    for (int64_t i = 0; i < nB * nAcc; ++i) {
      Value &x = p[m * nB * nAcc + i];
      x = e.exp2(e.subF(x, mSafe));
      sum = e.addF(sum, x);
      if (f.dropoutP || f.pScale)
        x = math.probability(rows, row, keyOf(i / nAcc, i % nAcc), x);
    }
    Value l = e.load(lState, {e.idx(m)});
    e.store(e.addF(e.mulF(l, alpha[m]), sum), lState, {e.idx(m)});
  }

  // O^T = alpha O^T + V^T P^T, 16 dims x 16 rows per block.
  SmallVector<SmallVector<Value>> pOps(g.mFrags);
  for (int64_t m = 0; m < g.mFrags; ++m)
    for (int64_t nb = 0; nb < nB; ++nb)
      pOps[m].push_back(probabilityOperand(p, m, nb));
  for (int64_t db = 0; db < g.dBlocks(); ++db) {
    SmallVector<Value> acc;
    for (int64_t m = 0; m < g.mFrags; ++m) {
      SmallVector<Value> elems;
      for (int64_t j = 0; j < nAcc; ++j)
        elems.push_back(e.mulF(e.load(oAcc, {accIndex(m, db, j)}), alpha[m]));
      acc.push_back(vector::FromElementsOp::create(b, accType, elems));
    }
    for (int64_t nb = 0; nb < nB; ++nb) {
      Value vOp = operand(vtS, e.add(row16, e.idx(16 * db)), 16 * nb);
      for (int64_t m = 0; m < g.mFrags; ++m)
        acc[m] = mma(vOp, pOps[m][nb], acc[m]);
    }
    for (int64_t m = 0; m < g.mFrags; ++m)
      for (int64_t j = 0; j < nAcc; ++j)
        e.store(vector::ExtractOp::create(b, acc[m], j), oAcc,
                {accIndex(m, db, j)});
    scheduleFence();
  }
}

void WaveAttentionBuilder::visitOutputs(
    int64_t slot,
    llvm::function_ref<void(Value d, Value v, bool partial)> store) {
  for (int64_t db = 0; db < g.dBlocks(); ++db) {
    for (int64_t j = 0; j < mc.accElems(); ++j) {
      Value d = e.add(e.idx(16 * db), accRow(j));
      Value v = e.load(oAcc, {accIndex(slot, db, j)});
      store(d, v, 16 * db + 16 > shape.headDim);
    }
  }
}

} // namespace mlir::attn::wave

void WaveProgramTarget::emitProgram(LoopEmitter &e, const TileShape &shape,
                                    const AttentionFeatures &f,
                                    const AttentionOutput &o, Value q,
                                    const ProgramRows &rows,
                                    ArrayRef<KvWalk> walks) {
  WaveAttentionBuilder(e, shape, f, o, q, entry, shared, computeType, threads,
                       chip)
      .emit(rows, walks);
}

namespace {
/// The ROCDL backend: waves of MFMA (CDNA) or WMMA (RDNA3).
class RocdlTarget : public GpuTarget {
public:
  explicit RocdlTarget(AmdChip chip) : chip(chip) {}
  FailureOr<Type> computeType(Type qType) const override {
    // f32 on CDNA's MFMA f32; RDNA3 has no f32 WMMA.
    return gpuComputeType(qType, /*f32=*/!chip.wmma);
  }
  std::string supportedTypes() const override {
    if (chip.wmma)
      return "f16, bf16 and fp8 do; RDNA3 has no f32 WMMA: run f32 on the "
             "CPU pipeline, or on gfx90a/gfx942 (MFMA f32)";
    return "f16, bf16, fp8 and f32 do";
  }
  KernelLaunch launchFor(Operation *, const TileShape &shape,
                         Type ct) const override {
    Geometry g = geometryOf(shape, ct.getIntOrFloatBitWidth() / 8);
    return {saturatingMul(g.waves, chip.waveSize),
            saturatingMul(g.ldsElems(), ct.getIntOrFloatBitWidth() / 8)};
  }
  ProgramBody bodyOf(const TileShape &shape) const override {
    // Per fragment, S^T and O^T are nBlocks and dBlocks 16x16 blocks of
    // accElems elements per lane. (Independent of the element size.)
    Geometry g = geometryOf(shape, 2);
    MatrixCore mc{chip.waveSize, chip.wmma};
    int64_t blocks = saturatingAdd(g.nBlocks(), g.dBlocks());
    return {16 * g.mFrags,
            saturatingMul(saturatingMul(g.mFrags, blocks), mc.accElems())};
  }
  int64_t maxSharedBytes() const override { return 64 * 1024; }
  Value exp2(ImplicitLocOpBuilder &b, Value x) const override {
    // v_exp_f32 (llvm.amdgcn.exp2): no device library; exp2(-inf) = 0.
    return ROCDL::ROCDLExp2::create(b, b.getF32Type(), x);
  }
  Value log2(ImplicitLocOpBuilder &b, Value x) const override {
    // v_log_f32 (llvm.amdgcn.log): log2 without a device library; log2(0)
    // = -inf.
    return ROCDL::ROCDLLog::create(b, b.getF32Type(), x);
  }
  Value sqrt(ImplicitLocOpBuilder &b, Value x) const override {
    // llvm.sqrt.f32: v_sqrt_f32 with the backend's correction, no ocml.
    return LLVM::SqrtOp::create(b, x);
  }
  Value rcp(ImplicitLocOpBuilder &b, Value x) const override {
    // v_rcp_f32 (llvm.amdgcn.rcp): 1 ulp, no division expansion.
    return LLVM::CallIntrinsicOp::create(b, b.getF32Type(),
                                         b.getStringAttr("llvm.amdgcn.rcp.f32"),
                                         ValueRange{x})
        .getResult(0);
  }
  std::unique_ptr<ProgramTarget>
  programs(Block *entry, Value shared, Type ct, const KernelLaunch &launch,
           ArrayRef<TensorMapArg>) const override {
    return std::make_unique<WaveProgramTarget>(entry, shared, ct,
                                               launch.threads, chip);
  }

private:
  AmdChip chip;
};
} // namespace

void mlir::attn::registerRocdlTarget() {
  registerGpuTarget("rocdl",
                    [](StringRef chip, bool,
                       std::string &error) -> std::unique_ptr<GpuTarget> {
                      std::optional<AmdChip> amd = AmdChip::parse(chip);
                      if (!amd) {
                        error = ("unknown rocdl chip '" + chip +
                                 "' (expected " + AmdChip::kSupported + ")")
                                    .str();
                        return nullptr;
                      }
                      return std::make_unique<RocdlTarget>(*amd);
                    });
}

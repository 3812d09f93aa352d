//===- WarpAttention.cpp - attention programs on NVIDIA tensor cores ------===//
//
// Fragment layouts are those of mma.sync.m16n8k16 (PTX ISA, "Matrix
// Fragments for mma.m16n8k16"): with lane = 4 * quadRow + quadCol, a thread
// holds accumulator elements (quadRow + 8 * (i / 2), 2 * quadCol + i % 2),
// i = 0..3, of each 16x8 tile. The S accumulator of QK therefore has the
// layout of PV's A operand, so P never leaves registers; row statistics
// reduce over the four lanes of a quad with two xor shuffles.
//
// Per-thread state (running max, sum, output accumulator) lives in small
// arrays allocated in the kernel's entry block and indexed only by
// constants, so LLVM promotes them to registers (the resource lit test checks
// that no kernel has a stack frame).
//
//===----------------------------------------------------------------------===//

#include "WarpAttention.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::attn;

namespace {
constexpr int64_t kLanes = 32;
constexpr double kLn2 = 0.6931471805599453;

int64_t roundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/// Static tile geometry of a program.
struct Geometry {
  int64_t mRows;  // M tile rows, rounded up to the 16 rows of a warp
  int64_t warps;
  int64_t dPad;   // head dim rounded up to the MMA k of 16
  int64_t stride; // shared-memory row stride in elements: 16 bytes of
                  // padding keep ldmatrix rows in distinct banks
  int64_t bn;
};

Geometry geometryOf(const TileShape &s) {
  Geometry g;
  g.mRows = roundUp(s.rows(), 16);
  g.warps = g.mRows / 16;
  g.dPad = roundUp(s.headDim, 16);
  g.stride = g.dPad + 8;
  g.bn = roundUp(s.blockN, 16);
  return g;
}

/// One row of a tile being staged in shared memory.
struct StagedRow {
  Value valid;                                   // false: the row is zero
  Value mem;                                     // source memref
  std::function<SmallVector<Value>(Value)> at;   // indices of element d
  Value scale;                                   // dequantization, or null
  bool chunks = false; // see KeyRow::kChunks
};

class WarpAttentionBuilder {
public:
  WarpAttentionBuilder(LoopEmitter &e, const TileShape &shape,
                       const AttentionFeatures &f, const AttentionOutput &o,
                       Value q, Block *entry, Value shared, Type ct,
                       int64_t threads)
      : e(e), b(e.builder()), shape(shape), g(geometryOf(shape)),
        math(e, shape, f), f(f), o(o), q(q), entry(entry), shared(shared),
        ct(ct), threads(threads) {}

  void emit(const ProgramRows &rows, ArrayRef<KvWalk> walks);

private:
  using Acc = std::array<Value, 4>;

  void setUpThreads();
  Value view(int64_t firstRow, int64_t numRows);
  void stage(Value dst, int64_t numRows,
             llvm::function_ref<StagedRow(Value)> source);
  Value commitGroup();
  /// Waits until at most `pending` of this thread's copy groups are in
  /// flight, then synchronizes the block.
  void waitGroups(Value token, int32_t pending);
  void stageKeys(const KvWalk &walk, Value n0, Value nValid, bool isK);
  /// P of one KV tile (accumulator layout) and the factors that rescale
  /// the output rows (quadRow, quadRow + 8) to the new running max.
  struct Probabilities {
    SmallVector<Acc> p;
    Value alpha[2];
  };
  Probabilities scores(const ProgramRows &rows, Value n0, Value nValid);
  void accumulate(const Probabilities &probs);
  SmallVector<Value> ldmatrix(Value tile, Value row, Value col, int numTiles,
                              bool transpose);
  Value operandReg(Value pair);
  Value pack(Value lo, Value hi);
  Acc mma(ArrayRef<Value> a, ArrayRef<Value> bRegs, const Acc &c);
  SmallVector<Value> queryFragment(int64_t kStep);
  Value quadReduce(Value x, bool isMax);
  void walkRange(const ProgramRows &rows, const KvWalk &walk, Value lo,
                 Value hi);
  void epilogue(const ProgramRows &rows);

  Value rowOf(int64_t half) {
    return e.add(e.add(e.mul(warp, e.idx(16)), quadRow), e.idx(8 * half));
  }
  Value colOf(int64_t j, int64_t i) {
    return e.add(e.mul(quadCol, e.idx(2)), e.idx(8 * j + i % 2));
  }
  Value accIndex(int64_t dj, int64_t i) { return e.idx(dj * 4 + i); }

  LoopEmitter &e;
  ImplicitLocOpBuilder &b;
  TileShape shape;
  Geometry g;
  AttentionMath math;
  const AttentionFeatures &f;
  const AttentionOutput &o;
  Value q;
  Block *entry;
  Value shared;
  Type ct;
  int64_t threads;

  Value tid, lane, warp, quadRow, quadCol;
  Value qS, kS, vS;
  Value oAcc, mState, lState;
  SmallVector<SmallVector<Value>> qFrags;
};

void WarpAttentionBuilder::setUpThreads() {
  tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  lane = e.remU(tid, e.idx(kLanes));
  warp = e.divU(tid, e.idx(kLanes));
  quadRow = e.divU(lane, e.idx(4));
  quadCol = e.remU(lane, e.idx(4));
}

Value WarpAttentionBuilder::view(int64_t firstRow, int64_t numRows) {
  auto space = gpu::AddressSpaceAttr::get(b.getContext(),
                                          gpu::AddressSpace::Workgroup);
  auto type = MemRefType::get({numRows, g.stride}, ct, MemRefLayoutAttrInterface(),
                              space);
  int64_t bytes = firstRow * g.stride * ct.getIntOrFloatBitWidth() / 8;
  return memref::ViewOp::create(b, type, shared, e.idx(bytes), ValueRange{});
}

void WarpAttentionBuilder::stage(Value dst, int64_t numRows,
                                 llvm::function_ref<StagedRow(Value)> source) {
  // Chunks of 8 elements (16 bytes), spread over the block's threads.
  int64_t chunksPerRow = g.dPad / 8, total = numRows * chunksPerRow;
  int64_t iters = (total + threads - 1) / threads;
  auto vecType = VectorType::get({8}, ct);

  struct Chunk {
    Value r, d0, inRange;
    StagedRow src;
    bool vector;
    SmallVector<Value> at; // source indices of element d0
  };
  auto prepare = [&](Value c) {
    Chunk k;
    k.r = e.divU(c, e.idx(chunksPerRow));
    k.d0 = e.mul(e.remU(c, e.idx(chunksPerRow)), e.idx(8));
    k.src = source(k.r);
    auto srcType = cast<MemRefType>(k.src.mem.getType());
    k.vector = false;
    if (k.src.chunks && !k.src.scale && srcType.getElementType() == ct &&
        shape.headDim % 8 == 0) {
      SmallVector<int64_t> strides;
      int64_t offset;
      k.vector = succeeded(srcType.getStridesAndOffset(strides, offset)) &&
                 strides.back() == 1;
    }
    k.inRange = e.andI(k.src.valid, e.lt(k.d0, e.idx(shape.headDim)));
    if (k.vector)
      k.at = k.src.at(k.d0);
    return k;
  };
  auto issue = [&](const Chunk &k) {
    if (k.vector) {
      // 16 bytes straight from global memory into shared memory.
      auto ifOp = scf::IfOp::create(b, k.inRange, /*withElseRegion=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
      nvgpu::DeviceAsyncCopyOp::create(
          b, nvgpu::DeviceAsyncTokenType::get(b.getContext()), dst,
          ValueRange{k.r, k.d0}, k.src.mem, k.at, b.getIndexAttr(8), Value(),
          UnitAttr());
      b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
      Value zero = arith::ConstantOp::create(
          b, vecType, DenseElementsAttr::get(vecType, b.getZeroAttr(ct)));
      vector::StoreOp::create(b, zero, dst, ValueRange{k.r, k.d0});
      return;
    }
    // Gather element by element (fp8 decode, scales, strided sources).
    SmallVector<Value> elems;
    for (int64_t j = 0; j < 8; ++j) {
      Value d = e.add(k.d0, e.idx(j));
      Value ok = e.andI(k.src.valid, e.lt(d, e.idx(shape.headDim)));
      auto ifOp = scf::IfOp::create(b, TypeRange{b.getF32Type()}, ok,
                                    /*withElseRegion=*/true);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        scf::YieldOp::create(b, e.load32(k.src.mem, k.src.at(d), k.src.scale));
        b.setInsertionPointToStart(ifOp.elseBlock());
        scf::YieldOp::create(b, e.f32(0.0));
      }
      elems.push_back(arith::TruncFOp::create(b, ct, ifOp.getResult(0)));
    }
    Value vec = vector::FromElementsOp::create(b, vecType, elems);
    vector::StoreOp::create(b, vec, dst, ValueRange{k.r, k.d0});
  };

  if (total % threads == 0 && iters <= 32) {
    // Unrolled, with every chunk's address (block-table reads included)
    // computed before the first copy: the reads overlap instead of each
    // waiting behind the previous copy.
    SmallVector<Chunk> chunks;
    for (int64_t it = 0; it < iters; ++it)
      chunks.push_back(prepare(e.add(tid, e.idx(it * threads))));
    for (const Chunk &k : chunks)
      issue(k);
    return;
  }
  e.forLoop(0, iters, [&](Value it) {
    Value c = e.add(tid, e.mul(it, e.idx(threads)));
    e.ifThen(e.lt(c, e.idx(total)), [&] { issue(prepare(c)); });
  });
}

Value WarpAttentionBuilder::commitGroup() {
  // Always a group (possibly empty), so that wait counts are static.
  auto tokenType = nvgpu::DeviceAsyncTokenType::get(b.getContext());
  return nvgpu::DeviceAsyncCreateGroupOp::create(b, tokenType, ValueRange{});
}

void WarpAttentionBuilder::waitGroups(Value token, int32_t pending) {
  nvgpu::DeviceAsyncWaitOp::create(b, token, b.getI32IntegerAttr(pending));
  gpu::BarrierOp::create(b);
}

SmallVector<Value> WarpAttentionBuilder::ldmatrix(Value tile, Value row,
                                                  Value col, int numTiles,
                                                  bool transpose) {
  auto type = VectorType::get({numTiles, 2}, ct);
  Value m = nvgpu::LdMatrixOp::create(b, type, tile, ValueRange{row, col},
                                      transpose, numTiles);
  SmallVector<Value> regs;
  for (int i = 0; i < numTiles; ++i)
    regs.push_back(operandReg(vector::ExtractOp::create(b, m, i)));
  return regs;
}

Value WarpAttentionBuilder::operandReg(Value pair) {
  // mma.sync takes f16 pairs as vector<2xf16> and bf16 pairs as i32.
  if (ct.isF16())
    return pair;
  Value asInt = vector::BitCastOp::create(
      b, VectorType::get({1}, b.getI32Type()), pair);
  return vector::ExtractOp::create(b, asInt, 0);
}

Value WarpAttentionBuilder::pack(Value lo, Value hi) {
  Value pair = vector::FromElementsOp::create(
      b, VectorType::get({2}, ct),
      ValueRange{arith::TruncFOp::create(b, ct, lo),
                 arith::TruncFOp::create(b, ct, hi)});
  return operandReg(pair);
}

WarpAttentionBuilder::Acc WarpAttentionBuilder::mma(ArrayRef<Value> a,
                                                    ArrayRef<Value> bRegs,
                                                    const Acc &c) {
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

SmallVector<Value> WarpAttentionBuilder::queryFragment(int64_t kStep) {
  if (kStep < static_cast<int64_t>(qFrags.size()))
    return qFrags[kStep];
  // A operand (16x16, row major): matrices (rows 0-7 | 8-15) x (cols 0-7 |
  // 8-15), lane l addressing row l % 8 + 8 * (l / 8 % 2), col 8 * (l / 16).
  Value row = e.add(e.add(e.mul(warp, e.idx(16)), e.remU(lane, e.idx(8))),
                    e.mul(e.remU(e.divU(lane, e.idx(8)), e.idx(2)), e.idx(8)));
  Value col = e.add(e.idx(kStep * 16), e.mul(e.divU(lane, e.idx(16)), e.idx(8)));
  return ldmatrix(qS, row, col, 4, /*transpose=*/false);
}

Value WarpAttentionBuilder::quadReduce(Value x, bool isMax) {
  for (int32_t offset : {1, 2}) {
    Value other = gpu::ShuffleOp::create(b, x, offset, kLanes,
                                         gpu::ShuffleMode::XOR)
                      .getShuffleResult();
    x = isMax ? e.maxF(x, other) : e.addF(x, other);
  }
  return x;
}

void WarpAttentionBuilder::emit(const ProgramRows &rows,
                                ArrayRef<KvWalk> walks) {
  setUpThreads();
  qS = view(0, g.mRows);
  kS = view(g.mRows, g.bn);
  vS = view(g.mRows + g.bn, g.bn);
  {
    // Per-thread state, promoted to registers by LLVM.
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(entry);
    Type f32 = b.getF32Type();
    oAcc = memref::AllocaOp::create(b, MemRefType::get({g.dPad / 8 * 4}, f32));
    mState = memref::AllocaOp::create(b, MemRefType::get({2}, f32));
    lState = memref::AllocaOp::create(b, MemRefType::get({2}, f32));
  }

  // The query tile: row r is token r / pack, head headBase + r % pack.
  stage(qS, g.mRows, [&](Value r) {
    Value tok = math.tokenOf(r);
    StagedRow s;
    s.valid = e.lt(tok, rows.numTokens);
    Value qRow = e.add(rows.qTokBase,
                       e.min(tok, e.sub(rows.numTokens, e.idx(1))));
    Value head = math.headOf(rows, r);
    s.mem = q;
    s.at = [=](Value d) { return SmallVector<Value>{qRow, head, d}; };
    s.scale = rows.qScale;
    s.chunks = true;
    return s;
  });
  waitGroups(commitGroup(), 0);
  // Keep Q in registers when it fits next to the accumulators.
  if (g.dPad <= 128) {
    for (int64_t kk = 0; kk < g.dPad / 16; ++kk)
      qFrags.push_back(queryFragment(kk));
  }

  for (int64_t h = 0; h < 2; ++h) {
    auto [m0, l0] = math.initialState(rows, rowOf(h));
    // The sum is kept per lane and added over the quad at the end: only one
    // lane of the quad starts with the sink's 1.
    l0 = e.select(e.eq(quadCol, e.idx(0)), l0, e.f32(0.0));
    e.store(m0, mState, {e.idx(h)});
    e.store(l0, lState, {e.idx(h)});
  }
  for (int64_t i = 0; i < g.dPad / 8 * 4; ++i)
    e.store(e.f32(0.0), oAcc, {e.idx(i)});

  for (const KvWalk &walk : walks)
    walk.visitRanges(e, [&](Value lo, Value hi) {
      walkRange(rows, walk, lo, hi);
    });
  epilogue(rows);
}

void WarpAttentionBuilder::stageKeys(const KvWalk &walk, Value n0,
                                     Value nValid, bool isK) {
  // Rows past nValid are zero (their keys are masked, and a zero V row keeps
  // p = 0 columns from multiplying garbage).
  Value lastKey = e.add(n0, e.sub(nValid, e.idx(1)));
  stage(isK ? kS : vS, g.bn, [&](Value r) {
    Value key = e.min(e.add(n0, r), lastKey); // never locate past the range
    KeyRow kr = walk.locate(e, key);
    StagedRow s;
    s.valid = e.lt(r, nValid);
    s.mem = isK ? kr.k : kr.v;
    s.at = isK ? kr.kAt : kr.vAt;
    s.scale = isK ? kr.kScale : kr.vScale;
    s.chunks = isK ? kr.kChunks : kr.vChunks;
    return s;
  });
}

void WarpAttentionBuilder::walkRange(const ProgramRows &rows,
                                     const KvWalk &walk, Value lo, Value hi) {
  // Software pipeline over the range's tiles, with one K and one V buffer:
  // V(t) loads while QK(t) and the softmax run, K(t+1) while PV(t) runs.
  Value bn = e.idx(g.bn);
  auto validAt = [&](Value n0) { return e.min(bn, e.sub(hi, n0)); };
  e.ifThen(e.lt(lo, hi), [&] { stageKeys(walk, lo, validAt(lo), true); });
  commitGroup();
  e.forLoop(lo, hi, bn, [&](Value n0) {
    Value nValid = validAt(n0);
    stageKeys(walk, n0, nValid, false);
    waitGroups(commitGroup(), 1); // K(t) has landed
    Probabilities p = scores(rows, n0, nValid);
    gpu::BarrierOp::create(b); // every warp is done with K(t)
    Value next = e.add(n0, bn);
    e.ifThen(e.lt(next, hi),
             [&] { stageKeys(walk, next, validAt(next), true); });
    waitGroups(commitGroup(), 1); // V(t) has landed
    accumulate(p);
    gpu::BarrierOp::create(b); // every warp is done with V(t)
  });
}

WarpAttentionBuilder::Probabilities
WarpAttentionBuilder::scores(const ProgramRows &rows, Value n0, Value nValid) {
  // S = Q K^T: B operand tiles are 8 keys x 16 dims, read from K's rows.
  int64_t nTiles = g.bn / 8, kSteps = g.dPad / 16;
  SmallVector<Acc> s(nTiles);
  Value lane8 = e.remU(lane, e.idx(8));
  for (int64_t j = 0; j < nTiles; ++j) {
    Acc acc = {e.f32(0.0), e.f32(0.0), e.f32(0.0), e.f32(0.0)};
    Value row = e.add(e.idx(8 * j), lane8);
    for (int64_t kk = 0; kk < kSteps; kk += 2) {
      if (kk + 1 < kSteps) {
        Value col =
            e.add(e.idx(kk * 16), e.mul(e.divU(lane, e.idx(8)), e.idx(8)));
        SmallVector<Value> kb = ldmatrix(kS, row, col, 4, false);
        acc = mma(queryFragment(kk), {kb[0], kb[1]}, acc);
        acc = mma(queryFragment(kk + 1), {kb[2], kb[3]}, acc);
      } else {
        Value col = e.add(e.idx(kk * 16),
                          e.mul(e.remU(e.divU(lane, e.idx(8)), e.idx(2)),
                                e.idx(8)));
        SmallVector<Value> kb = ldmatrix(kS, row, col, 2, false);
        acc = mma(queryFragment(kk), {kb[0], kb[1]}, acc);
      }
    }
    s[j] = acc;
  }

  // Score modifiers and masks, element by element.
  for (int64_t j = 0; j < nTiles; ++j) {
    for (int64_t i = 0; i < 4; ++i) {
      Value row = rowOf(i / 2), col = colOf(j, i);
      Value key = e.add(n0, col);
      Value ok = e.andI(e.lt(col, nValid), math.visible(rows, row, key));
      if (f.bias) {
        // The bias is read only where the score exists.
        auto ifOp = scf::IfOp::create(b, TypeRange{b.getF32Type()}, ok, true);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        scf::YieldOp::create(b, math.score(rows, row, key, s[j][i]));
        b.setInsertionPointToStart(ifOp.elseBlock());
        scf::YieldOp::create(b, e.negInf());
        b.setInsertionPointAfter(ifOp);
        s[j][i] = ifOp.getResult(0);
      } else {
        s[j][i] = e.select(ok, math.score(rows, row, key, s[j][i]), e.negInf());
      }
    }
  }

  // Online softmax on the fragments: rows quadRow (i < 2) and quadRow + 8.
  SmallVector<Value> alpha(2);
  for (int64_t h = 0; h < 2; ++h) {
    Value mx = e.negInf();
    for (int64_t j = 0; j < nTiles; ++j)
      mx = e.maxF(mx, e.maxF(s[j][2 * h], s[j][2 * h + 1]));
    mx = quadReduce(mx, /*isMax=*/true);
    Value mOld = e.load(mState, {e.idx(h)});
    Value mNew = e.maxF(mOld, mx);
    Value mSafe = math.safeMax(mNew);
    alpha[h] = e.exp2(e.subF(mOld, mSafe));
    Value sum = e.f32(0.0);
    for (int64_t j = 0; j < nTiles; ++j) {
      for (int64_t i = 2 * h; i < 2 * h + 2; ++i) {
        s[j][i] = e.exp2(e.subF(s[j][i], mSafe));
        sum = e.addF(sum, s[j][i]);
      }
    }
    Value l = e.load(lState, {e.idx(h)});
    e.store(e.addF(e.mulF(l, alpha[h]), sum), lState, {e.idx(h)});
    e.store(mNew, mState, {e.idx(h)});
  }
  if (f.dropoutP || f.pScale) {
    for (int64_t j = 0; j < nTiles; ++j)
      for (int64_t i = 0; i < 4; ++i)
        s[j][i] = math.probability(rows, rowOf(i / 2), e.add(n0, colOf(j, i)),
                                   s[j][i]);
  }
  Probabilities probs;
  probs.p = std::move(s);
  probs.alpha[0] = alpha[0];
  probs.alpha[1] = alpha[1];
  return probs;
}

void WarpAttentionBuilder::accumulate(const Probabilities &probs) {
  const SmallVector<Acc> &s = probs.p;
  const Value *alpha = probs.alpha;
  Value lane8 = e.remU(lane, e.idx(8));
  // O = alpha * O + P V: B operand tiles are 16 keys x 8 dims of V, read
  // transposed.
  int64_t dTiles = g.dPad / 8;
  SmallVector<Acc> acc(dTiles);
  for (int64_t dj = 0; dj < dTiles; ++dj)
    for (int64_t i = 0; i < 4; ++i)
      acc[dj][i] =
          e.mulF(e.load(oAcc, {accIndex(dj, i)}), alpha[i / 2]);
  Value vRowInTile = e.add(lane8, e.mul(e.remU(e.divU(lane, e.idx(8)), e.idx(2)),
                                        e.idx(8)));
  Value vColInTile = e.mul(e.divU(lane, e.idx(16)), e.idx(8));
  for (int64_t kk = 0; kk < g.bn / 16; ++kk) {
    SmallVector<Value> a = {pack(s[2 * kk][0], s[2 * kk][1]),
                            pack(s[2 * kk][2], s[2 * kk][3]),
                            pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                            pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
    Value row = e.add(e.idx(kk * 16), vRowInTile);
    for (int64_t dp = 0; dp < g.dPad / 16; ++dp) {
      Value col = e.add(e.idx(dp * 16), vColInTile);
      SmallVector<Value> vb = ldmatrix(vS, row, col, 4, /*transpose=*/true);
      acc[2 * dp] = mma(a, {vb[0], vb[1]}, acc[2 * dp]);
      acc[2 * dp + 1] = mma(a, {vb[2], vb[3]}, acc[2 * dp + 1]);
    }
  }
  for (int64_t dj = 0; dj < dTiles; ++dj)
    for (int64_t i = 0; i < 4; ++i)
      e.store(acc[dj][i], oAcc, {accIndex(dj, i)});
}

void WarpAttentionBuilder::epilogue(const ProgramRows &rows) {
  for (int64_t h = 0; h < 2; ++h) {
    // Shuffles first: every lane of the warp takes part.
    Value l = quadReduce(e.load(lState, {e.idx(h)}), /*isMax=*/false);
    Value row = rowOf(h);
    Value tok = math.tokenOf(row);
    e.ifThen(e.lt(tok, rows.numTokens), [&] {
      Value qRow = e.add(rows.qTokBase, tok);
      Value head = math.headOf(rows, row);
      Value factor;
      if (o.segmentMax) {
        e.ifThen(e.eq(quadCol, e.idx(0)), [&] {
          Value mx = e.load(mState, {e.idx(h)});
          e.store(e.mulF(mx, e.f32(kLn2)), o.segmentMax,
                  {qRow, head, rows.segment});
          e.store(l, o.segmentSum, {qRow, head, rows.segment});
        });
      } else {
        factor = math.outputFactor(l, o.outScale);
      }
      for (int64_t dj = 0; dj < g.dPad / 8; ++dj) {
        for (int64_t i = 2 * h; i < 2 * h + 2; ++i) {
          Value d = colOf(dj, i);
          Value v = e.load(oAcc, {accIndex(dj, i)});
          auto store = [&] {
            if (o.segmentMax)
              e.store(v, o.out, {qRow, head, rows.segment, d});
            else
              e.storeFrom32(e.mulF(v, factor), o.out, {qRow, head, d});
          };
          if (8 * dj + 8 > shape.headDim)
            e.ifThen(e.lt(d, e.idx(shape.headDim)), store);
          else
            store();
        }
      }
    });
  }
}

} // namespace

FailureOr<Type> mlir::attn::warpComputeType(Type qType) {
  if (qType.isF16() || qType.isBF16())
    return qType;
  if (isa<Float8E4M3FNType, Float8E5M2Type>(qType))
    return Float16Type::get(qType.getContext());
  return failure();
}

WarpLaunch mlir::attn::warpLaunchFor(const TileShape &shape, Type ct) {
  Geometry g = geometryOf(shape);
  int64_t bytes =
      (g.mRows + 2 * g.bn) * g.stride * ct.getIntOrFloatBitWidth() / 8;
  return {g.warps * kLanes, bytes};
}

void WarpProgramTarget::grid(LoopEmitter &e, ArrayRef<Value> ubs,
                             llvm::function_ref<void(ValueRange)> body) {
  // The launch grid is exactly `ubs` (the host computes the same extents).
  ImplicitLocOpBuilder &b = e.builder();
  SmallVector<Value> ids;
  gpu::Dimension dims[] = {gpu::Dimension::x, gpu::Dimension::y,
                           gpu::Dimension::z};
  for (size_t i = 0; i < ubs.size(); ++i)
    ids.push_back(gpu::BlockIdOp::create(b, dims[i]));
  body(ids);
}

void WarpProgramTarget::emitProgram(LoopEmitter &e, const TileShape &shape,
                                    const AttentionFeatures &f,
                                    const AttentionOutput &o, Value q,
                                    const ProgramRows &rows,
                                    ArrayRef<KvWalk> walks) {
  WarpAttentionBuilder(e, shape, f, o, q, entry, shared, computeType, threads)
      .emit(rows, walks);
}

void WarpProgramTarget::spread(LoopEmitter &e, Value lo, Value hi,
                               llvm::function_ref<void(Value)> body) {
  Value tid = gpu::ThreadIdOp::create(e.builder(), gpu::Dimension::x);
  e.forLoop(e.add(lo, tid), hi, e.idx(threads), body);
}

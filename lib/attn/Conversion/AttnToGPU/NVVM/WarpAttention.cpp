//===- WarpAttention.cpp - attention programs on NVIDIA tensor cores ------===//
//
// The warp program (WarpProgram.h): Q staging, the KV walks, the online
// softmax on accumulator fragments, the epilogue, and the ProgramTarget.
//
//===----------------------------------------------------------------------===//

#include "WarpProgram.h"
#include "attn/Conversion/AttnToGPU/Targets.h"
#include "attn/IR/AttnOps.h"
#include "attn/Transforms/Schedule.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::warp;

namespace mlir::attn::warp {

void WarpAttentionBuilder::chooseScoreOperands(const ProgramRows &rows,
                                               ArrayRef<KvWalk> walks) {
  qType = cast<MemRefType>(q.getType()).getElementType();
  qk8 = chip.fp8 && !g.wgmma && g.dPad % 32 == 0 && isFp8(qType) &&
        !walks.empty();
  for (const KvWalk &walk : walks)
    qk8 = qk8 && isFp8(walk.keyType) && walk.keyType == walks[0].keyType &&
          walk.keyScale == walks[0].keyScale;
  decodesWalks = !qk8 && llvm::any_of(walks, [](const KvWalk &walk) {
    return isFp8(walk.keyType);
  });
  if (!qk8)
    return;
  kType = walks[0].keyType;
  Value qScale = rows.qScale, kScale = walks[0].keyScale;
  dotScale = qScale && kScale ? e.mulF(qScale, kScale)
             : qScale         ? qScale
                              : kScale;
}

void WarpAttentionBuilder::setUp(const ProgramRows &rows,
                                 ArrayRef<KvWalk> walks) {
  setUpThreads();
  // Decode-row programs that read K raw launch three an SM (KernelLaunch::
  // smallGridProgramsPerSM): their registers must fit that too, whatever
  // a fused merge's whole rounds would take (their 96 loads in flight
  // took fp8 split decode to 204-220; they used 159-168 before).
  if (compactDecodeRows(g, rawKeysDirect) && !shape.producerWarps)
    entry->getParentOp()->setAttr(
        NVVM::NVVMDialect::getMaxnregAttrName(),
        b.getI32IntegerAttr(kRegistersPerSM /
                            (kCompactProgramsPerSM * threads) / 8 * 8));
  chooseScoreOperands(rows, walks);
  foldCacheScales(walks);
  // (convert-attn-to-gpu gives bf16 queries f16 tiles only where the walk
  // folds its scales: stagesFp8CacheAsF16.)
  assert((foldsCacheScales || !ct.isF16() || !qType.isBF16()) &&
         "f16 tiles for bf16 queries without folded cache scales");
  // (The launch left out the K tile only where this walk folds: reading K
  // raw needs the scales folded, readsRawFp8KeysDirect.)
  assert((foldsCacheScales || !rawKeysDirect) &&
         "a launch without the K tile for a walk that does not fold");
  if (g.wgmma) {
    // The shared window address of the dynamic shared memory, rounded up
    // to the swizzle atoms' 1024 bytes (launches reserve kAlignSlack).
    Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, shared);
    Value atom = e.idx(wgmma::kGroupBytes);
    tilesAddress = e.mul(e.ceilDiv(base, atom), atom);
    alignPad = e.sub(tilesAddress, base);
  }
  qS = tile(e.idx(0), g.mRows, g.dPad, g.stride);
  cur = kvBuffers(e.idx(0));
  tma = setUpTma(rows, walks);
  if (!tma)
    setUpGather(rows, walks);
  // (Unified programs: one paged walk of one range, often of few tiles
  // (decode), where waiting for Q before tile 0 is even issued costs a
  // memory latency.)
  if (!tma && !gather && g.wgmma && g.stages >= 2 && walks.size() == 1 &&
      walks[0].paged && !walks[0].forEachRange)
    prefetchedWalk = &walks[0];
}

void WarpAttentionBuilder::stageQuery(const ProgramRows &rows) {
  if (qMap || gather) {
    // The producer's copy (WarpSpecialized.cpp).
    waitBarrier(e.idx(kQueryBarrier), e.remU(programIndex, e.idx(2)));
    // (Threads' copies are generic-proxy writes; TMA's are async already.)
    if (gather && !qMap)
      wgmma::fenceProxyAsync(b);
    if (math.linearScores())
      foldScoreFactor();
    return;
  }
  if (ct.isF16() && qType.isBF16())
    scaleQueryForF16(rows);
  // qk8: the raw fp8 bytes; the scales then apply to the dot products.
  stage(qk8 ? bytesOf(qS, qType) : qS, g.mRows, g.dPad, [&](Value r) {
    StagedRow s = queryRow(rows, r, /*scaled=*/!qk8);
    if (queryPrescale)
      s.scale = s.scale ? e.mulF(s.scale, queryPrescale) : queryPrescale;
    if (rawKeysDirect) {
      // (Element by element: adjacent positions hold dims 4 apart.)
      auto at = s.at;
      s.at = [this, at](Value p) { return at(rawKeyDim(p)); };
      s.chunks = false;
    }
    return s;
  });
  if (prefetchedWalk) {
    // Tile 0 of the walk into buffer 0 under Q's copies; Q has landed once
    // the groups after its own (tile 0's, the empty one) may be pending.
    const KvWalk &walk = *prefetchedWalk;
    commitGroup();
    Value nValid = e.min(e.idx(g.bn), e.sub(walk.hi, walk.lo));
    e.ifThen(e.lt(walk.lo, walk.hi), [&] {
      KvBuffers first = kvBuffers(e.idx(0));
      stageKeys(walk, first.k, walk.lo, nValid, true);
      stageValues(walk, first, walk.lo, nValid);
    });
    commitGroup();
    waitGroups(commitGroup(), 2);
  } else {
    waitGroups(commitGroup(), 0);
  }
  if (math.linearScores())
    foldScoreFactor();
  // Keep Q in registers when it fits next to the accumulators; otherwise
  // each KV tile reads it again from shared memory (as FlashAttention-2).
  // (wgmma reads Q from shared memory.) Registers per element: 16 bits,
  // or a tf32 (two with exactF32).
  int64_t qRegBits = ct.isF32() ? (exactF32 ? 64 : 32) : 16;
  if (!g.wgmma && g.mFrags * g.dPad * qRegBits <= 128 * 16 &&
      !(g.mFrags > 1 && g.bn >= 64)) {
    for (int64_t m = 0; m < g.mFrags; ++m) {
      SmallVector<SmallVector<Value>> frags;
      for (int64_t kk = 0; kk < qkSteps(); ++kk)
        frags.push_back(queryFragment(m, kk));
      qFrags.push_back(std::move(frags));
    }
  }
}

void WarpAttentionBuilder::foldScoreFactor() {
  // The softmax wants maxima of factor * dot; for a positive factor those
  // are factor * (maxima of dot). A negative factor is made positive by
  // negating the staged Q, which is exact. A zero factor becomes the
  // smallest normal float, so that masked -inf scores stay -inf, not NaN.
  Value factor = math.linearScoreFactor();
  if (dotScale)
    factor = e.mulF(factor, dotScale);
  Value negative = e.cmpF(arith::CmpFPredicate::OLT, factor, e.f32(0.0));
  e.ifThen(negative, [&] {
    // Every element of the view (padding included) is negated: of fp8
    // wgmma's Q, exactly the bytes TMA delivered (its view spans the row
    // stride, in fp8 bytes; spanning the head's 16-bit size, the loop
    // reached into the K buffers).
    ArrayRef<int64_t> viewShape = cast<MemRefType>(qS.mem.getType()).getShape();
    int64_t chunksPerRow = viewShape[1] / 8;
    auto vecType = VectorType::get({8}, ct);
    e.forLoop(tid, e.idx(viewShape[0] * chunksPerRow), e.idx(threads),
              [&](Value c) {
                SmallVector<Value> at{
                    e.divU(c, e.idx(chunksPerRow)),
                    e.mul(e.remU(c, e.idx(chunksPerRow)), e.idx(8))};
                // (Whole chunks of 8 at chunk boundaries, up to 16 bytes:
                // see dequantize.)
                int64_t chunkBytes = 8 * ct.getIntOrFloatBitWidth() / 8;
                llvm::MaybeAlign chunk(std::min<int64_t>(16, chunkBytes));
                Value x = vector::LoadOp::create(b, vecType, qS.mem, at,
                                                 /*nontemporal=*/false, chunk);
                Value negated;
                if (qk8 || qgmma) {
                  // Pairs of fp8: flip both sign bits.
                  auto bits = VectorType::get({8}, b.getI16Type());
                  Value signs = arith::ConstantOp::create(
                      b, DenseElementsAttr::get(
                             bits, b.getI16IntegerAttr(int16_t(0x8080))));
                  negated = vector::BitCastOp::create(
                      b, vecType,
                      arith::XOrIOp::create(
                          b, vector::BitCastOp::create(b, bits, x), signs));
                } else {
                  negated = arith::NegFOp::create(b, x);
                }
                vector::StoreOp::create(b, negated, qS.mem, at,
                                        /*nontemporal=*/false, chunk);
              });
    if (g.wgmma)
      wgmma::fenceProxyAsync(b);
    syncComputeThreads();
  });
  Value magnitude =
      e.select(negative, arith::NegFOp::create(b, factor), factor);
  foldedFactor = e.maxF(magnitude, e.f32(std::numeric_limits<float>::min()));
}

void WarpAttentionBuilder::walkRange(const ProgramRows &rows,
                                     const KvWalk &walk, Value lo, Value hi) {
  // Warps whose rows are all past the tile's tokens (decode programs, the
  // last tile of a sequence) stage and synchronize but skip the math.
  // (wgmma: a warpgroup's warps issue its MMAs together.)
  Value firstRow =
      g.wgmma ? e.mul(e.divU(warp, e.idx(4)), e.idx(wgmma::kRows)) : warpRow0;
  Value active = e.lt(firstRow, e.mul(rows.numTokens, e.idx(shape.pack)));
  if (ws)
    return walkSpecialized(rows, walk, walkStart(walk, lo), hi);
  if (tma)
    return walkTma(rows, walk, lo, hi, active);
  if (g.stages >= 2)
    return walkDoubleBuffered(rows, walk, lo, hi, active);
  Value kScale, vScale;
  if (stagesRawFp8(walk, kScale, vScale))
    return walkRawFp8(rows, walk, lo, hi, active, kScale, vScale);
  // Software pipeline with one K and one V buffer: V(t) loads while QK(t)
  // and the softmax run, K(t+1) while PV(t) runs.
  Value bn = e.idx(g.bn);
  auto validAt = [&](Value n0) { return e.min(bn, e.sub(hi, n0)); };
  e.ifThen(e.lt(lo, hi),
           [&] { stageKeys(walk, cur.k, lo, validAt(lo), true); });
  commitGroup();
  e.forLoop(lo, hi, bn, [&](Value n0) {
    pinLaneCoordinates();
    Value nValid = validAt(n0);
    stageValues(walk, cur, n0, nValid);
    waitGroups(commitGroup(), 1); // K(t) has landed
    Probabilities p = activeScores(rows, active, n0, nValid);
    gpu::BarrierOp::create(b); // every warp is done with K(t)
    Value next = e.add(n0, bn);
    e.ifThen(e.lt(next, hi),
             [&] { stageKeys(walk, cur.k, next, validAt(next), true); });
    waitGroups(commitGroup(), 1); // V(t) has landed
    e.ifThen(active, [&] { accumulate(p, walk.valueKeyMajor); });
    gpu::BarrierOp::create(b); // every warp is done with V(t)
    unpinLaneCoordinates();
  });
}

void WarpAttentionBuilder::walkDoubleBuffered(const ProgramRows &rows,
                                              const KvWalk &walk, Value lo,
                                              Value hi, Value active) {
  // Tile t computes from buffer t % stages while K and V of tiles t + 1 ..
  // t + stages - 1 load into the others; the barrier after each wait also
  // tells that every warp is done with tile t - 1's buffer, which tile
  // t + stages - 1 refills.
  int64_t stages = g.stages;
  Value bn = e.idx(g.bn);
  auto validAt = [&](Value n0) { return e.min(bn, e.sub(hi, n0)); };
  auto stageTile = [&](const KvBuffers &buf, Value n0, Value nValid) {
    stageKeys(walk, buf.k, n0, nValid, true);
    stageValues(walk, buf, n0, nValid);
  };
  // (stageQuery issued tile 0 of a prefetched walk, whose only range this
  // is, with Q.)
  bool prefetched = prefetchedWalk == &walk;
  if (!prefetched)
    gpu::BarrierOp::create(b); // the previous range may still read buffer 0
  for (int64_t i = prefetched ? 1 : 0; i + 1 < stages; ++i) {
    Value n0 = i ? e.add(lo, e.idx(i * g.bn)) : lo;
    e.ifThen(e.lt(n0, hi),
             [&] { stageTile(kvBuffers(e.idx(i)), n0, validAt(n0)); });
    commitGroup();
  }
  KvBuffers first = cur;
  // Paged walks next to the largest accumulators (a warpgroup's [64 x 256],
  // two mma.sync fragments of [16 x 128]) spill with their staging
  // addresses hoisted. (Dense walks keep theirs: pinning them costs 4-10%
  // there.)
  bool pinStaging =
      walk.paged && (g.wgmma ? g.dPad > 128 : g.mFrags > 1 && g.dPad > 64);
  e.forLoop(lo, hi, bn, [&](Value n0) {
    pinLaneCoordinates(pinStaging);
    Value index = e.divU(e.sub(n0, lo), bn);
    Value slot = e.remU(index, e.idx(stages));
    // K(t) and V(t) have landed (the groups of the tiles after it and the
    // empty one just committed may still be pending).
    waitGroups(commitGroup(), stages == 2 ? 0 : stages - 1);
    Value next = e.add(n0, stages == 2 ? bn : e.idx((stages - 1) * g.bn));
    e.ifThen(e.lt(next, hi), [&] {
      KvBuffers buf = kvBuffers(
          stages == 2 ? e.sub(e.idx(1), slot)
                      : e.remU(e.add(index, e.idx(stages - 1)), e.idx(stages)));
      e.ifThenElse(
          e.le(e.add(next, bn), hi), [&] { stageTile(buf, next, Value()); },
          [&] { stageTile(buf, next, validAt(next)); });
    });
    commitGroup();
    cur = kvBuffers(slot);
    computeTile(rows, walk, active, n0, validAt(n0));
    cur = first;
    unpinLaneCoordinates();
  });
}

void WarpAttentionBuilder::computeTile(const ProgramRows &rows,
                                       const KvWalk &walk, Value active,
                                       Value n0, Value nValid) {
  // One straight-line body per case (no barrier inside a tile here), so
  // that the unmasked tiles carry no mask arithmetic at all.
  e.ifThen(active, [&] {
    auto tile = [&](bool masked) {
      if (g.wgmma)
        return warpgroupTile(rows, n0, nValid, masked, walk.valueKeyMajor);
      accumulate(scores(rows, n0, nValid, masked), walk.valueKeyMajor);
    };
    if (f.bias)
      return tile(true);
    e.ifThenElse(
        tileUnmasked(rows, n0, nValid), [&] { tile(false); },
        [&] { tile(true); });
  });
}

WarpAttentionBuilder::Probabilities
WarpAttentionBuilder::activeScores(const ProgramRows &rows, Value active,
                                   Value n0, Value nValid) {
  int64_t numP = g.mFrags * g.nTiles() * 2, numAlpha = 2 * g.mFrags;
  SmallVector<Type> types(numP, pairType());
  types.append(numAlpha, b.getF32Type());
  auto flat = [&](bool masked) {
    Probabilities p = scores(rows, n0, nValid, masked);
    SmallVector<Value> v = p.p;
    v.append(p.alpha);
    return v;
  };
  SmallVector<Value> v = e.ifElse(
      active, types,
      [&] {
        if (f.bias)
          return flat(true);
        return e.ifElse(
            tileUnmasked(rows, n0, nValid), types, [&] { return flat(false); },
            [&] { return flat(true); });
      },
      [&] {
        SmallVector<Value> v(numP, pack(e.f32(0.0), e.f32(0.0)));
        v.append(numAlpha, e.f32(1.0));
        return v;
      });
  Probabilities p;
  p.p.assign(v.begin(), v.begin() + numP);
  p.alpha.assign(v.begin() + numP, v.end());
  return p;
}

Value WarpAttentionBuilder::tileUnmasked(const ProgramRows &rows, Value n0,
                                         Value nValid) {
  if (!segments.empty()) {
    Value keys = e.idx(g.bn / int64_t(segments.size()));
    Value all = e.boolean(true);
    for (auto [first, valid] : segments)
      all = e.andI(
          all, e.andI(e.eq(valid, keys),
                      math.tileFullyVisible(rows, first, e.add(first, keys))));
    return all;
  }
  return e.andI(e.eq(nValid, e.idx(g.bn)),
                math.tileFullyVisible(rows, n0, e.add(n0, e.idx(g.bn))));
}

WarpAttentionBuilder::Probabilities
WarpAttentionBuilder::scores(const ProgramRows &rows, Value n0, Value nValid,
                             bool masked) {
  // S = Q K^T: B operand tiles are 8 keys x 16 dims (tf32: 8), read from
  // K's rows; each is read once per warp and used by all its M fragments.
  int64_t nTiles = g.nTiles(), kSteps = qkSteps();
  Acc zero = {e.f32(0.0), e.f32(0.0), e.f32(0.0), e.f32(0.0)};
  SmallVector<Acc> s(g.mFrags * nTiles, zero); // [m * nTiles + j]
  // Warps splitting the keys hold few S tiles (two), each a chain of
  // dependent MMAs over the head: the odd k steps go to a second chain,
  // added at the end (H200 fp8 decode: 3091 -> 3126-3138 GB/s,
  // bench/results/2026-11-29-h200-decode-key-split.md).
  bool twoChains = g.keyWarps > 1;
  SmallVector<Acc> odd(twoChains ? s.size() : 0, zero);
  Value lane8 = e.remU(lane, e.idx(8));
  // (A warp of several splitting the keys reads its own.)
  Value keyRow = g.keyWarps > 1 ? e.add(warpKey0, lane8) : lane8;
  // Q fragments are read one k step at a time when S and O already fill
  // the registers (two fragments of a wide S).
  // (3xTF32 operands take twice the registers: one k step at a time.)
  bool pairs =
      (!(g.registersFull() && qFrags.empty()) && !exactF32) || rawKeysDirect;
  // (wgmma: issued and waited for here. Issued before the next tile's
  // copies instead, the accumulators would be in flight across their
  // branches, and ptxas serializes the MMAs: C7518.)
  if (g.wgmma)
    s = awaitScores(issueWarpgroupScores(0, g.bn), 0);
  for (int64_t kk = 0; !g.wgmma && kk < kSteps; kk += pairs ? 2 : 1) {
    bool pair = pairs && kk + 1 < kSteps;
    SmallVector<SmallVector<Value>> qa[2];
    for (int64_t m = 0; m < g.mFrags; ++m) {
      qa[0].push_back(queryFragment(m, kk));
      if (pair)
        qa[1].push_back(queryFragment(m, kk + 1));
    }
    for (int64_t j = 0; j < nTiles; ++j) {
      Value row = e.add(e.idx(8 * j), keyRow);
      Value laneCol = pair ? e.mul(e.divU(lane, e.idx(8)), e.idx(g.chunk))
                           : e.mul(e.remU(e.divU(lane, e.idx(8)), e.idx(2)),
                                   e.idx(g.chunk));
      SmallVector<Value> kb =
          rawKeysDirect
              ? rawKeyOperands(j, kk)
              : ldmatrix(cur.k.mem, row, e.add(e.idx(kk * g.kElems()), laneCol),
                         pair ? 4 : 2, false);
      for (int64_t m = 0; m < g.mFrags; ++m) {
        Acc &acc = s[m * nTiles + j];
        Acc &acc2 = twoChains ? odd[m * nTiles + j] : acc;
        auto product = [&](ArrayRef<Value> a, ArrayRef<Value> bRegs,
                           const Acc &c) {
          return qk8 ? mmaFp8(a, bRegs, c) : mma(a, bRegs, c);
        };
        acc = product(qa[0][m], {kb[0], kb[1]}, acc);
        if (pair)
          acc2 = product(qa[1][m], {kb[2], kb[3]}, acc2);
      }
    }
  }
  for (auto [acc, acc2] : llvm::zip(s, odd))
    for (int64_t i = 0; i < 4; ++i)
      acc[i] = e.addF(acc[i], acc2[i]);

  return softmax(rows, n0, nValid, masked, s, 0);
}

WarpAttentionBuilder::Probabilities
WarpAttentionBuilder::softmax(const ProgramRows &rows, Value n0, Value nValid,
                              bool masked, ArrayRef<Acc> s, int64_t firstTile) {
  int64_t nTiles = s.size() / g.mFrags;
  SmallVector<Value> p = modifiedScores(rows, n0, nValid, s, masked, firstTile);

  // Online softmax on the fragments: rows quadRow (h = 0) and quadRow + 8
  // of each M fragment. Each phase runs over all of the thread's rows
  // before the next, so the shuffles and exp2s of independent rows overlap.
  int64_t numRows = 2 * g.mFrags;
  auto rowElems = [&](int64_t st) {
    SmallVector<Value *> xs;
    int64_t m = st / 2, h = st % 2;
    for (int64_t j = 0; j < nTiles; ++j)
      for (int64_t i = 2 * h; i < 2 * h + 2; ++i)
        xs.push_back(&p[pIndex(m, j, i, nTiles)]);
    return xs;
  };
  SmallVector<Value> mx(numRows);
  for (int64_t st = 0; st < numRows; ++st) {
    SmallVector<Value> xs;
    for (Value *x : rowElems(st))
      xs.push_back(*x);
    mx[st] = treeReduce(xs, /*isMax=*/true);
  }
  quadReduce(mx, /*isMax=*/true);
  Probabilities probs;
  probs.alpha.resize(numRows);
  // The reference max of a row moves only when the tile's max exceeds it by
  // more than kRescaleSlack (log2 units): P stays below 2^kRescaleSlack, and
  // O and l, both relative to the reference, need no rescaling on most
  // tiles. (Not with an fp8 P, whose quantization expects P <= 1, nor where
  // the registers are full: the conditional rescaling spills there.)
  constexpr float kRescaleSlack = 8.0f;
  bool lazy =
      !f.pScale && !g.registersFull() && (!straightLine || deferredRescale);
  SmallVector<Value> negMax(numRows);
  Value grownAny = e.boolean(false);
  for (int64_t st = 0; st < numRows; ++st) {
    Value tileMax = foldedFactor ? e.mulF(mx[st], foldedFactor) : mx[st];
    Value mOld = e.load(mState, {e.idx(st)});
    Value mNew = e.maxF(mOld, tileMax);
    Value grown;
    if (lazy) {
      grown = e.cmpF(arith::CmpFPredicate::OGT, tileMax,
                     e.addF(mOld, e.f32(kRescaleSlack)));
      mNew = e.select(grown, mNew, mOld);
      grownAny = e.orI(grownAny, grown);
    }
    Value mSafe = math.safeMax(mNew);
    probs.alpha[st] = e.exp2(e.subF(mOld, mSafe));
    if (lazy)
      probs.alpha[st] = e.select(grown, probs.alpha[st], e.f32(1.0));
    negMax[st] = e.subF(e.f32(0.0), mSafe);
    // fp8 wgmma: P / |p_scale| = exp2(s - max - log2 |p_scale|).
    if (qgmma)
      negMax[st] = e.subF(negMax[st], pScaleLog2);
    e.store(mNew, mState, {e.idx(st)});
  }
  if (lazy) {
    // Warp-uniform: whether any row of the warp has a new reference.
    Value all = arith::ConstantOp::create(b, b.getI32IntegerAttr(-1));
    probs.rescale = NVVM::VoteSyncOp::create(b, b.getI1Type(), all, grownAny,
                                             NVVM::VoteSyncKind::any);
  }
  SmallVector<Value> sums(numRows);
  for (int64_t st = 0; st < numRows; ++st) {
    SmallVector<Value> terms;
    for (Value *x : rowElems(st)) {
      // exp2(factor * dot - max) is one FMA when the factor is folded.
      // (llvm.intr.fma: math.fma would become a libdevice call).
      *x = e.exp2(foldedFactor
                      ? LLVM::FMAOp::create(b, *x, foldedFactor, negMax[st])
                      : e.addF(*x, negMax[st]));
      terms.push_back(*x);
    }
    sums[st] = treeReduce(terms, /*isMax=*/false);
    if (qgmma)
      sums[st] = e.mulF(sums[st], pScaleAbs);
  }
  for (int64_t st = 0; st < numRows; ++st) {
    Value l = e.load(lState, {e.idx(st)});
    e.store(e.addF(e.mulF(l, probs.alpha[st]), sums[st]), lState, {e.idx(st)});
  }
  // (fp8 wgmma quantizes P as it packs it, packP8, and takes no dropout:
  // multipliesFp8OnWgmma.)
  if (!qgmma && (f.dropoutP || f.pScale)) {
    for (int64_t m = 0; m < g.mFrags; ++m)
      for (int64_t j = 0; j < nTiles; ++j)
        for (int64_t i = 0; i < 4; ++i) {
          Value &x = p[pIndex(m, j, i, nTiles)];
          x = math.probability(rows, rowOf(m, i / 2),
                               e.add(n0, colOf(firstTile + j, i)), x);
        }
  }
  // P as PV's A operand, packed to the compute type right away: half the
  // registers while the next K tile is staged. (Unpacked with `deferPack`:
  // f32 elements in accumulator order, for packP.)
  if (deferPack) {
    probs.p = std::move(p);
    return probs;
  }
  for (int64_t m = 0; m < g.mFrags; ++m)
    for (int64_t j = 0; j < nTiles; ++j)
      for (int64_t h = 0; h < 2; ++h)
        probs.p.push_back(pack(p[pIndex(m, j, 2 * h, nTiles)],
                               p[pIndex(m, j, 2 * h + 1, nTiles)]));
  return probs;
}

SmallVector<Value> WarpAttentionBuilder::modifiedScores(const ProgramRows &rows,
                                                        Value n0, Value nValid,
                                                        ArrayRef<Acc> s,
                                                        bool masked,
                                                        int64_t firstTile) {
  SmallVector<Value> out(s.size() * 4);
  int64_t nTiles = s.size() / g.mFrags;
  // Warpgroup programs mask causal and windowed tiles by intervals: per
  // row, the i32 offset of this thread's first column from the row's first
  // visible one and the count of visible columns; per element, an add of a
  // constant and an unsigned compare. (mma.sync threads hold up to 16 rows:
  // per-row intervals spilled 24-68 bytes there.) Every program takes
  // ALiBi's distances in 32 bits. (64-bit position arithmetic per element
  // spilled 8-372 bytes in windowed and ALiBi prefix prefill.)
  ImplicitLocOpBuilder &b = e.builder();
  // (Tiles masked only by their end keep the plain compares: one bound for
  // all rows; intervals spilled 4 bytes in a pinned non-causal schedule.)
  bool intervals = masked && g.wgmma && !f.bias && math.intervalMasks() &&
                   (f.causal || f.window);
  bool alibiDistances = math.alibiByDistance();
  // Union walks' tiles are segments of keys (each block's own first key
  // and valid count): each column takes its segment's. (Block-sparse
  // scores are linear: no key enters them but through the masks.)
  assert((segments.empty() || (math.linearScores() && !f.dropoutP &&
                               !f.pScale && firstTile == 0)) &&
         "segmented tiles of scores that depend on the key");
  SmallVector<std::pair<Value, Value>, 2> tileSegments(segments);
  if (tileSegments.empty())
    tileSegments.push_back({n0, nValid});
  int64_t segmentKeys = g.bn / int64_t(tileSegments.size());
  // [segment][stateIndex]
  SmallVector<SmallVector<std::pair<Value, Value>>> rowIntervals(
      tileSegments.size());
  SmallVector<Value> rowDistances; // [stateIndex]
  Value firstCol, firstKey;
  if (intervals || alibiDistances)
    firstCol = e.toI32(colOf(firstTile, 0));
  if (alibiDistances && !g.wgmma)
    firstKey = arith::AddIOp::create(b, e.toI32(n0), firstCol);
  for (int64_t m = 0; m < g.mFrags; ++m)
    for (int64_t half = 0; half < 2; ++half) {
      Value row = rowOf(m, half);
      // (Segment h's columns count from h * segmentKeys.)
      for (auto [h, segment] : llvm::enumerate(tileSegments))
        if (intervals) {
          auto [lo, span] =
              math.visibleColumns(rows, row, segment.first, segment.second);
          Value from =
              h ? arith::AddIOp::create(b, lo, e.i32(int64_t(h) * segmentKeys))
                : lo;
          rowIntervals[h].push_back(
              {arith::SubIOp::create(b, firstCol, from), span});
        }
      // Warpgroup threads hold two rows: each keeps the distance of its
      // first key. mma.sync threads may hold many (GQA packing): each keeps
      // its reference, subtracted per element (fewer registers: a GQA-64
      // f32 kernel spilled 8 bytes the other way).
      if (alibiDistances)
        rowDistances.push_back(
            g.wgmma ? arith::AddIOp::create(
                          b, e.toI32(e.sub(n0, math.alibiReference(rows, row))),
                          firstCol)
                    : e.toI32(math.alibiReference(rows, row)));
    }
  for (int64_t m = 0; m < g.mFrags; ++m) {
    for (int64_t j = 0; j < nTiles; ++j) {
      for (int64_t i = 0; i < 4; ++i) {
        Value dot = s[m * nTiles + j][i];
        Value row = rowOf(m, i / 2), col = colOf(firstTile + j, i);
        // The column's segment, and the column within it.
        int64_t h = 8 * j / segmentKeys;
        auto [segmentN0, segmentValid] = tileSegments[h];
        if (h)
          col = e.sub(col, e.idx(h * segmentKeys));
        Value key = e.add(segmentN0, col);
        Value &x = out[pIndex(m, j, i, nTiles)];
        if (dotScale && !foldedFactor)
          dot = e.mulF(dot, dotScale);
        // colOf(firstTile + j, i) - colOf(firstTile, 0) = 8 j + i % 2.
        int64_t colStep = 8 * j + i % 2;
        Value distance;
        if (alibiDistances && g.wgmma)
          distance = arith::AddIOp::create(
              b, rowDistances[stateIndex(m, i / 2)], e.i32(colStep));
        else if (alibiDistances)
          distance = arith::SubIOp::create(
              b, arith::AddIOp::create(b, firstKey, e.i32(colStep)),
              rowDistances[stateIndex(m, i / 2)]);
        Value scored =
            foldedFactor ? dot : math.score(rows, row, key, dot, distance);
        if (!masked) {
          x = scored;
          continue;
        }
        if (intervals) {
          auto [offset, span] = rowIntervals[h][stateIndex(m, i / 2)];
          Value rel = arith::AddIOp::create(b, offset, e.i32(colStep));
          Value ok =
              arith::CmpIOp::create(b, arith::CmpIPredicate::ult, rel, span);
          x = e.select(ok, scored, e.negInf());
          continue;
        }
        Value ok =
            e.andI(e.lt(col, segmentValid), math.visible(rows, row, key));
        if (f.bias) {
          x = e.ifElse(
              ok, {b.getF32Type()},
              [&] {
                return SmallVector<Value>{math.score(rows, row, key, dot)};
              },
              [&] { return SmallVector<Value>{e.negInf()}; })[0];
        } else {
          x = e.select(ok, scored, e.negInf());
        }
      }
    }
  }
  return out;
}

SmallVector<Value> WarpAttentionBuilder::packP(ArrayRef<Value> p) {
  SmallVector<Value> packed;
  for (size_t i = 0; i + 1 < p.size(); i += 2)
    packed.push_back(pack(p[i], p[i + 1]));
  return packed;
}

void WarpAttentionBuilder::scaleOutput(ArrayRef<Value> alpha) {
  for (int64_t m = 0; m < g.mFrags; ++m)
    for (int64_t dj = 0; dj < g.dTiles(); ++dj)
      for (int64_t i = 0; i < 4; ++i)
        e.store(e.mulF(e.load(oAcc, {accIndex(m, dj, i)}),
                       alpha[stateIndex(m, i / 2)]),
                oAcc, {accIndex(m, dj, i)});
}

void WarpAttentionBuilder::rescaleOutput(const Probabilities &probs) {
  // (Specialized consumers with lazy rescaling did it at the step's start.)
  if (deferredRescale)
    return;
  auto rescale = [&] { scaleOutput(probs.alpha); };
  if (probs.rescale)
    e.ifThen(probs.rescale, rescale);
  else
    rescale();
}

void WarpAttentionBuilder::accumulate(const Probabilities &probs,
                                      bool vTransposed) {
  // O = alpha * O + P V. Each B operand tile (16 keys x 8 dims of V) is
  // read once per warp for all its M fragments: with ldmatrix.trans from a
  // [bn, D] tile, or plainly from a transposed [D, bn] one.
  if (g.wgmma)
    return storeWarpgroupOutput(issueWarpgroupPV(probs, vTransposed, 0));
  int64_t dTiles = g.dTiles(), kSteps = g.warpKeys() / 16;
  rescaleOutput(probs);
  SmallVector<Acc> acc(g.mFrags * dTiles); // [m * dTiles + dj]
  for (int64_t m = 0; m < g.mFrags; ++m)
    for (int64_t dj = 0; dj < dTiles; ++dj)
      for (int64_t i = 0; i < 4; ++i)
        acc[m * dTiles + dj][i] = e.load(oAcc, {accIndex(m, dj, i)});
  if (ct.isF32())
    accumulateTf32(probs, vTransposed, acc);
  // P of key step kk for fragment m: A operand of mma.
  auto pOperand = [&](int64_t m, int64_t kk) {
    auto pv = [&](int64_t j, int64_t h) {
      return probs.p[(m * g.nTiles() + j) * 2 + h];
    };
    return SmallVector<Value>{pv(2 * kk, 0), pv(2 * kk, 1), pv(2 * kk + 1, 0),
                              pv(2 * kk + 1, 1)};
  };
  Value lane8 = e.remU(lane, e.idx(8));
  // The warp's own keys (Geometry::keyWarps).
  Value key0 = g.keyWarps > 1 ? warpKey0 : e.idx(0);
  if (ct.isF32()) {
    // (above)
  } else if (vTransposed) {
    // x4: dims 8dj.. x keys (16kk .. +8 | +8 .. +16 | 16(kk+1) ..): the B
    // operands of key steps kk and kk + 1 for one 8-dim tile.
    for (int64_t kk = 0; kk < kSteps; kk += 2) {
      bool pair = kk + 1 < kSteps;
      SmallVector<SmallVector<Value>> a0, a1;
      for (int64_t m = 0; m < g.mFrags; ++m) {
        a0.push_back(pOperand(m, kk));
        if (pair)
          a1.push_back(pOperand(m, kk + 1));
      }
      Value laneCol =
          pair ? e.mul(e.divU(lane, e.idx(8)), e.idx(8))
               : e.mul(e.remU(e.divU(lane, e.idx(8)), e.idx(2)), e.idx(8));
      for (int64_t dj = 0; dj < dTiles; ++dj) {
        SmallVector<Value> vb = ldmatrix(
            cur.vt.mem, e.add(e.idx(8 * dj), lane8),
            e.add(e.add(key0, e.idx(kk * 16)), laneCol), pair ? 4 : 2, false);
        for (int64_t m = 0; m < g.mFrags; ++m) {
          Acc &c = acc[m * dTiles + dj];
          c = mma(a0[m], {vb[0], vb[1]}, c);
          if (pair)
            c = mma(a1[m], {vb[2], vb[3]}, c);
        }
      }
    }
  } else {
    Value vRowInTile =
        e.add(lane8, e.mul(e.remU(e.divU(lane, e.idx(8)), e.idx(2)), e.idx(8)));
    Value vColInTile = e.mul(e.divU(lane, e.idx(16)), e.idx(8));
    for (int64_t kk = 0; kk < kSteps; ++kk) {
      SmallVector<SmallVector<Value>> a;
      for (int64_t m = 0; m < g.mFrags; ++m)
        a.push_back(pOperand(m, kk));
      Value row = e.add(e.add(key0, e.idx(kk * 16)), vRowInTile);
      for (int64_t dp = 0; dp < g.dPad / 16; ++dp) {
        Value col = e.add(e.idx(dp * 16), vColInTile);
        SmallVector<Value> vb =
            ldmatrix(cur.v.mem, row, col, 4, /*transpose=*/true);
        for (int64_t m = 0; m < g.mFrags; ++m) {
          Acc &lo = acc[m * dTiles + 2 * dp];
          Acc &hi = acc[m * dTiles + 2 * dp + 1];
          lo = mma(a[m], {vb[0], vb[1]}, lo);
          hi = mma(a[m], {vb[2], vb[3]}, hi);
        }
      }
    }
  }
  for (int64_t m = 0; m < g.mFrags; ++m)
    for (int64_t dj = 0; dj < dTiles; ++dj)
      for (int64_t i = 0; i < 4; ++i)
        e.store(acc[m * dTiles + dj][i], oAcc, {accIndex(m, dj, i)});
}

void WarpAttentionBuilder::visitOutputs(
    int64_t slot,
    llvm::function_ref<void(Value d, Value v, bool partial)> store) {
  int64_t m = slot / 2, h = slot % 2;
  for (int64_t dj = 0; dj < g.dTiles(); ++dj) {
    for (int64_t i = 2 * h; i < 2 * h + 2; ++i) {
      Value d = dimOf(dj, i);
      Value v = e.load(oAcc, {accIndex(m, dj, i)});
      store(d, v, 8 * dj + 8 > shape.headDim);
    }
  }
}

bool WarpAttentionBuilder::visitOutputPairs(
    int64_t slot, llvm::function_ref<void(Value d, Value v0, Value v1)> store) {
  // Accumulator elements 2h and 2h + 1 of a tile are columns 2 quadCol and
  // 2 quadCol + 1 of one row. Tiles past the head dim (padded to 16) are
  // not stored.
  if (shape.headDim % 8)
    return false;
  int64_t m = slot / 2, h = slot % 2;
  for (int64_t dj = 0; dj < shape.headDim / 8; ++dj)
    store(dimOf(dj, 2 * h), e.load(oAcc, {accIndex(m, dj, 2 * h)}),
          e.load(oAcc, {accIndex(m, dj, 2 * h + 1)}));
  return true;
}

bool WarpAttentionBuilder::visitOutputChunks(
    int64_t slot, llvm::function_ref<Value(Value, Value)> pack,
    llvm::function_ref<void(Value d, Value chunk)> store) {
  // Tile j's pair of this lane holds columns 8 j + 2 quadCol (+ 1). In each
  // group of four tiles, lane q wants tile 4G + q from every lane of its
  // quad: in round r the partner quadCol ^ r sends its pair of tile
  // 4G + (its quadCol ^ r), which lands at position quadCol ^ r.
  // (sm_90a, where it was measured; not where the registers are full: the
  // exchange holds a row's pairs at once.)
  if (shape.headDim % 32 || !chip.wgmma || g.registersFull())
    return false;
  int64_t m = slot / 2, h = slot % 2;
  Type i32 = b.getI32Type();
  auto bits = [&](Value pair) {
    return vector::ExtractOp::create(
               b, vector::BitCastOp::create(b, VectorType::get({1}, i32), pair),
               ArrayRef<int64_t>{0})
        .getResult();
  };
  // The element of `xs` at dynamic index `at` (0 .. 3).
  auto pick = [&](ArrayRef<Value> xs, Value at) {
    Value v = xs[3];
    for (int64_t k = 2; k >= 0; --k)
      v = e.select(e.eq(at, e.idx(k)), xs[k], v);
    return v;
  };
  Type elem;
  for (int64_t group = 0; group < shape.headDim / 32; ++group) {
    SmallVector<Value> mine;
    for (int64_t k = 0; k < 4; ++k) {
      int64_t dj = 4 * group + k;
      Value pair = pack(e.load(oAcc, {accIndex(m, dj, 2 * h)}),
                        e.load(oAcc, {accIndex(m, dj, 2 * h + 1)}));
      elem = cast<VectorType>(pair.getType()).getElementType();
      mine.push_back(bits(pair));
    }
    // received[r]: the pair of partner quadCol ^ r (r = 0: this lane's).
    SmallVector<Value> received{pick(mine, quadCol)};
    for (int32_t r = 1; r < 4; ++r) {
      Value send = pick(mine, arith::XOrIOp::create(b, quadCol, e.idx(r)));
      received.push_back(
          gpu::ShuffleOp::create(b, send, r, kLanes, gpu::ShuffleMode::XOR)
              .getShuffleResult());
    }
    // Position p of the chunk comes from partner p = quadCol ^ r.
    SmallVector<Value> words;
    for (int64_t p = 0; p < 4; ++p)
      words.push_back(
          pick(received, arith::XOrIOp::create(b, quadCol, e.idx(p))));
    Value chunk = vector::BitCastOp::create(
        b, VectorType::get({8}, elem),
        vector::FromElementsOp::create(b, VectorType::get({4}, i32), words));
    store(e.mul(e.add(e.idx(4 * group), quadCol), e.idx(8)), chunk);
  }
  return true;
}

} // namespace mlir::attn::warp

bool WarpProgramTarget::wholeMergeRounds(const TileShape &shape) const {
  return compactDecodeRows(
      geometryOf(shape, chip.wgmma, computeType.getIntOrFloatBitWidth() / 8),
      rawKeysDirect);
}

void WarpProgramTarget::emitProgram(LoopEmitter &e, const TileShape &shape,
                                    const AttentionFeatures &f,
                                    const AttentionOutput &o, Value q,
                                    const ProgramRows &rows,
                                    ArrayRef<KvWalk> walks) {
  // (Keys before a walk's start are masked: starting earlier only adds
  // masked keys.)
  SmallVector<KvWalk> aligned(walks);
  for (KvWalk &walk : aligned)
    if (shape.producerWarps && chip.wgmma && copiesValueRuns16(walk))
      walk.lo = e.mul(e.divU(walk.lo, e.idx(16)), e.idx(16));
  WarpAttentionBuilder(
      e, shape, f, o, q, entry, shared, computeType, threads, chip, exactF32,
      maps, persistent ? &*persistent : nullptr, rawFp8Keys, rawKeysDirect)
      .emit(rows, aligned);
}

namespace {
/// The NVVM backend: warps of mma.sync / wgmma.
class NvvmTarget : public GpuTarget {
public:
  NvvmTarget(StringRef chip, bool exactF32)
      : chip(NvidiaChip::parse(chip)), exactF32(exactF32) {}
  FailureOr<Type> computeType(Type qType) const override {
    // f32 on tf32 mma.sync (sm_80 and up).
    return gpuComputeType(qType, /*f32=*/true);
  }
  Type programComputeType(Operation *op, const TileShape &shape,
                          Type ct) const override {
    return stagesFp8CacheAsF16(op, shape, ct, chip)
               ? Float16Type::get(ct.getContext())
               : ct;
  }
  std::string supportedTypes() const override {
    return "f16, bf16, fp8 and f32 (tf32) do";
  }
  /// sm_90's 227 KB (launches on smaller chips fail at run time, where the
  /// runtime names the kernel).
  int64_t maxSharedBytes() const override { return 227 * 1024; }
  KernelLaunch launchFor(Operation *op, const TileShape &shape,
                         Type ct) const override {
    return warpLaunchFor(op, shape, ct, chip);
  }
  ProgramBody bodyOf(const TileShape &shape) const override {
    return warpBodyOf(shape, chip);
  }
  Value exp2(ImplicitLocOpBuilder &b, Value x) const override {
    // ex2.approx: one MUFU instruction; exp2(-inf) = +0.
    return LLVM::CallIntrinsicOp::create(
               b, b.getF32Type(), b.getStringAttr("llvm.nvvm.ex2.approx.ftz.f"),
               ValueRange{x})
        .getResult(0);
  }
  Value log2(ImplicitLocOpBuilder &b, Value x) const override {
    // lg2.approx: one MUFU instruction; lg2(+0) = -inf.
    return LLVM::CallIntrinsicOp::create(
               b, b.getF32Type(), b.getStringAttr("llvm.nvvm.lg2.approx.f"),
               ValueRange{x})
        .getResult(0);
  }
  Value sqrt(ImplicitLocOpBuilder &b, Value x) const override {
    return LLVM::CallIntrinsicOp::create(b, b.getF32Type(),
                                         b.getStringAttr("llvm.nvvm.sqrt.rn.f"),
                                         ValueRange{x})
        .getResult(0);
  }
  Value rcp(ImplicitLocOpBuilder &b, Value x) const override {
    // rcp.approx.ftz: one MUFU instruction (div.rn.f32 is a subroutine).
    return LLVM::CallIntrinsicOp::create(
               b, b.getF32Type(), b.getStringAttr("llvm.nvvm.rcp.approx.ftz.f"),
               ValueRange{x})
        .getResult(0);
  }
  Value mulHiU32(ImplicitLocOpBuilder &b, Value x, Value y) const override {
    // mul.hi.u32: from a 64-bit product LLVM kept Philox's xors and first
    // multiply in 64 bits of PTX; the 32-bit form's dropout kernels ran
    // 1.06-1.20x faster on H200 (bench/results/2026-12-02-h200-session34.md).
    return LLVM::CallIntrinsicOp::create(b, b.getI32Type(),
                                         b.getStringAttr("llvm.nvvm.mulhi.ui"),
                                         ValueRange{x, y})
        .getResult(0);
  }
  SmallVector<TensorMapRequest>
  tensorMaps(Operation *op, const TileShape &shape, Type ct) const override {
    return warpTensorMaps(op, shape, ct, chip);
  }
  bool gathersKeys(Operation *op, const TileShape &shape,
                   Type ct) const override {
    return warpGathersKeys(op, shape, ct, chip);
  }
  bool walksLayoutRowPairs(Operation *op, const TileShape &shape,
                           Type ct) const override {
    return warpWalksLayoutRowPairs(op, shape, ct, chip);
  }
  bool splitsKeys(Operation *op, const TileShape &shape,
                  Type ct) const override {
    return geometryOf(shape, chip.wgmma, ct.getIntOrFloatBitWidth() / 8)
               .keyWarps > 1;
  }
  std::unique_ptr<ProgramTarget>
  programs(Block *entry, Value shared, Type ct, const KernelLaunch &launch,
           ArrayRef<TensorMapArg> maps) const override {
    auto target = std::make_unique<WarpProgramTarget>(
        entry, shared, ct, launch.threads, chip, exactF32, maps,
        launch.rawFp8Keys, launch.rawKeysDirect);
    if (launch.persistent)
      target->setPersistent(launch.threads / kLanes - kProducerWarps,
                            launch.claimsTileMajor);
    return target;
  }

private:
  NvidiaChip chip;
  bool exactF32;
};
} // namespace

void mlir::attn::registerNvvmTarget() {
  registerGpuTarget("nvvm", [](StringRef chip, bool exactF32, std::string &) {
    return std::make_unique<NvvmTarget>(chip, exactF32);
  });
}

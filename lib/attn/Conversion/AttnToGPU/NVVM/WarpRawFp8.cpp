//===- WarpRawFp8.cpp - fp8 cache pages staged raw -------------*- C++ -*-===//
//
// Decode-shaped sm_90a programs (mma.sync, one warp of rows) over paged
// fp8 caches: each tile's bytes are copied raw into shared memory, then
// decoded there into the K/V tiles the MMAs read. attn.unified's programs
// decode into f16 tiles, with the cache scales folded into the dot
// products and the output (and a bf16 Q staged times a power of two), and
// their QK reads K raw: each pair of bytes converts in registers into an
// f16x2 operand, so only V is decoded into a tile.
//
//===----------------------------------------------------------------------===//

#include "WarpProgram.h"
#include "attn/IR/AttnOps.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::warp;

namespace mlir::attn::warp {

void WarpAttentionBuilder::foldCacheScales(ArrayRef<KvWalk> walks) {
  // f16 tiles of one raw-staged fp8 walk (stagesFp8CacheAsF16, or f16
  // queries): each pair of bytes decodes by one conversion (every fp8 value
  // is an f16), and the walk's scales, one per program, apply to the dot
  // products (dotScale) and the output (accumulatorScale) instead of to
  // every element.
  if (!rawFp8Reserved || !ct.isF16() || qk8 || walks.size() != 1)
    return;
  const KvWalk &walk = walks.front();
  if (!walk.paged || walk.valueKeyMajor || walk.forEachRange ||
      !isFp8(walk.keyType))
    return;
  foldsCacheScales = true;
  dotScale = walk.keyScale;
  accumulatorScale = walk.locate(e, walk.lo).vScale;
}

Value WarpAttentionBuilder::rawKeyDim(Value p) {
  // rawKeyOperands gives k step i, for the lane of quad column q, its k
  // values 2q, 2q + 1 from dims 16i + 4q, +1 and its k values 2q + 8, +9
  // from dims 16i + 4q + 2, +3 (four bytes of one ldmatrix lane). Position
  // r = p % 16 of step p / 16 therefore holds dim 4 (r % 8 / 2) + 2 (r / 8)
  // + r % 2 of it. (QK sums over k: Q in the same order is all it needs.)
  Value r = e.remU(p, e.idx(16));
  Value dim =
      e.add(e.mul(e.divU(e.remU(r, e.idx(8)), e.idx(2)), e.idx(4)),
            e.add(e.mul(e.divU(r, e.idx(8)), e.idx(2)), e.remU(r, e.idx(2))));
  return e.add(e.mul(e.divU(p, e.idx(16)), e.idx(16)), dim);
}

SmallVector<Value> WarpAttentionBuilder::rawKeyOperands(int64_t j, int64_t kk) {
  // One ldmatrix.x2 of the raw rows viewed as f16 pairs: matrix h holds
  // dims 16 (kk + h) .. + 15 of keys 8j .. 8j + 7, each lane four bytes of
  // one key (row lane / 4); each pair of bytes converts (exactly) to the
  // f16x2 of one B register.
  Value row = e.add(e.idx(8 * j), e.remU(lane, e.idx(8)));
  if (g.keyWarps > 1)
    row = e.add(warpKey0, row);
  // (16-byte chunk kk + h of the row; swizzled rows keep it at chunk
  // (kk + h) ^ (row % 8): rawRing.)
  Value chunk = e.add(e.idx(kk), e.remU(e.divU(lane, e.idx(8)), e.idx(2)));
  if (rawKeysSwizzled(g))
    chunk = arith::XOrIOp::create(b, chunk, e.remU(row, e.idx(8)));
  Value col = e.mul(chunk, e.idx(8));
  SmallVector<Value> regs = ldmatrix(rawKeyPairs, row, col, 2, false);
  std::string cvt = isa<Float8E4M3FNType>(walkKeyType)
                        ? "cvt.rn.f16x2.e4m3x2 $0, $1;"
                        : "cvt.rn.f16x2.e5m2x2 $0, $1;";
  auto i16x2 = VectorType::get({2}, b.getI16Type());
  auto f16x2 = VectorType::get({2}, b.getF16Type());
  SmallVector<Value> operands;
  for (Value reg : regs) {
    Value units = vector::BitCastOp::create(b, i16x2, reg);
    for (int64_t h = 0; h < 2; ++h) {
      Value pair = inlinePtx(b, b.getI32Type(),
                             ValueRange{vector::ExtractOp::create(b, units, h)},
                             cvt, "=r,h", /*sideEffects=*/false);
      operands.push_back(vector::BitCastOp::create(
          b, f16x2,
          vector::FromElementsOp::create(
              b, VectorType::get({1}, b.getI32Type()), ValueRange{pair})));
    }
  }
  return operands;
}

void WarpAttentionBuilder::scaleQueryForF16(const ProgramRows &rows) {
  // bf16 Q multiplies in f16 here: it is staged times 2^-s, s chosen from
  // its largest magnitude M so that M * 2^-s lies in [2^14, 2^15): no
  // overflow, and every part down to M * 2^-28 stays exact (an f16 normal;
  // smaller ones round to f16 subnormals). The dot products are multiplied
  // by 2^s again. Both factors are powers of two.
  int64_t chunksPerRow = g.dPad / 8, total = g.mRows * chunksPerRow;
  int64_t iters = (total + threads - 1) / threads;
  Value local = e.reduce(0, iters, e.f32(0.0), [&](Value i, Value m) {
    Value c = e.add(e.remU(tid, e.idx(threads)), e.mul(i, e.idx(threads)));
    Value r = e.divU(c, e.idx(chunksPerRow));
    Value x0 = e.mul(e.remU(c, e.idx(chunksPerRow)), e.idx(8));
    StagedRow src = queryRow(rows, r, /*scaled=*/false);
    for (int64_t j = 0; j < 8; ++j) {
      Value x = e.add(x0, e.idx(j));
      Value ok = e.andI(e.andI(e.lt(c, e.idx(total)), src.valid),
                        e.lt(x, e.idx(shape.headDim)));
      Value v = e.ifElse(
          ok, {b.getF32Type()},
          [&] {
            Value q = e.load32(src.mem, src.at(x));
            return SmallVector<Value>{e.maxF(q, arith::NegFOp::create(b, q))};
          },
          [&] { return SmallVector<Value>{e.f32(0.0)}; })[0];
      m = e.maxF(m, v);
    }
    return m;
  });
  for (int32_t offset : {16, 8, 4, 2, 1})
    local = e.maxF(local, gpu::ShuffleOp::create(b, local, offset, kLanes,
                                                 gpu::ShuffleMode::XOR)
                              .getShuffleResult());
  // Across warps through the first K tile (free until the walk stages it,
  // after barriers that every thread reaches past this).
  int64_t warps = threads / kLanes;
  Value scratch = view(cur.k.offset, 1, warps, b.getF32Type());
  e.ifThen(e.eq(lane, e.idx(0)), [&] {
    e.store(local, scratch, {e.idx(0), warp});
  });
  syncComputeThreads();
  Value magnitude = e.f32(0.0);
  for (int64_t w = 0; w < warps; ++w)
    magnitude = e.maxF(magnitude, e.load(scratch, {e.idx(0), e.idx(w)}));
  syncComputeThreads();
  // s = exponent(M) - 14, within [-100, 113] so that 2^s and 2^-s are
  // normal floats (M = 0, NaN or inf: any s will do).
  Type i32 = b.getI32Type();
  Value bits = arith::BitcastOp::create(b, i32, magnitude);
  Value exponent = arith::AndIOp::create(
      b, arith::ShRUIOp::create(b, bits, e.i32(23)), e.i32(0xff));
  Value s = arith::SubIOp::create(b, exponent, e.i32(127 + 14));
  s = arith::MinSIOp::create(b, arith::MaxSIOp::create(b, s, e.i32(-100)),
                             e.i32(113));
  auto pow2 = [&](Value exp) { // 2^exp as f32
    return arith::BitcastOp::create(
               b, b.getF32Type(),
               arith::ShLIOp::create(
                   b, arith::AddIOp::create(b, exp, e.i32(127)), e.i32(23)))
        .getResult();
  };
  queryPrescale = pow2(arith::SubIOp::create(b, e.i32(0), s));
  Value restore = pow2(s);
  dotScale = dotScale ? e.mulF(dotScale, restore) : restore;
}

bool WarpAttentionBuilder::stagesRawFp8(const KvWalk &walk, Value &kScale,
                                        Value &vScale) {
  // The launch decided for the op (rawStagedFp8Keys) and reserved the
  // buffer; here only the walk is left to check: the cache's paged walk
  // (not the new tokens'), with V row-major (key-major V keeps the
  // register staging). (A walk without keyScale but with a key's scale
  // has per-token scales, which rawStagedFp8Keys excluded.)
  if (!rawFp8Reserved || !walk.paged || walk.valueKeyMajor ||
      !isFp8(walk.keyType))
    return false;
  walkKeyType = walk.keyType;
  // (Folded scales apply to the dot products and the output instead.)
  if (foldsCacheScales)
    return true;
  KeyRow any = walk.locate(e, walk.lo);
  assert((walk.keyScale || !any.kScale) && "per-token scales on the raw path");
  kScale = any.kScale;
  vScale = any.vScale;
  return true;
}

void WarpAttentionBuilder::walkRawFp8(const ProgramRows &rows,
                                      const KvWalk &walk, Value lo, Value hi,
                                      Value active, Value kScale,
                                      Value vScale) {
  // fp8 pages of decode-shaped programs: their bytes are copied (cp.async,
  // nothing waits) into a raw ring rawTilesAhead tiles ahead of the tile
  // that computes; each tile is then dequantized from shared memory
  // (16-byte reads, pair cvt) into the K and V tiles, or only V where QK
  // reads K raw (rawKeysDirect). (Decoding straight from global loads
  // waited on every load: the tile's compute stalled behind its staging.
  // One tile ahead, a program's 16 KB in flight left the fp8 decode at
  // half the bandwidth.)
  Value bn = e.idx(g.bn);
  int64_t ahead = rawTilesAhead(g);
  auto validAt = [&](Value n0) { return e.min(bn, e.sub(hi, n0)); };
  // Tile t's K slot is t mod rawKeySlots: where QK reads K raw, it stays
  // while the bytes of the next `ahead` tiles land in the other slots.
  // Its V slot (t mod `ahead`) is free once V is decoded, as is K's
  // otherwise.
  auto ring = [&](Value t) {
    return rawRing(e.remU(t, e.idx(rawKeySlots(g))), e.remU(t, e.idx(ahead)));
  };
  // (NHD pages: a key's dims are adjacent, so whole 16-byte runs of them
  // go in one copy each on sm_90a, whose raw rows are 16-byte aligned.)
  int64_t rawChunk = chip.wgmma && shape.headDim % 16 == 0 ? 16 : 8;
  auto copyRaw = [&](Value t) {
    Value n0 = e.add(lo, e.mul(t, bn));
    e.ifThen(e.lt(n0, hi), [&] {
      KvBuffers raw = ring(t);
      KvTileRows tile(e, walk, n0, validAt(n0), shape.headDim);
      stage(
          raw.k, g.bn, g.dPad,
          [&](Value r) { return tile.key(r, /*isK=*/true, /*scaled=*/false); },
          ChunkOrder::RowMajor, /*unrollTail=*/false, rawChunk);
      stage(
          raw.v, g.bn, g.dPad,
          [&](Value r) { return tile.key(r, /*isK=*/false, /*scaled=*/false); },
          ChunkOrder::RowMajor, /*unrollTail=*/false, rawChunk);
    });
    // (Always a group, possibly empty: the waits below count tiles.)
    return commitGroup();
  };
  gpu::BarrierOp::create(b); // the previous range may still read the tiles
  Value token;
  for (int64_t t = 0; t < ahead; ++t)
    token = copyRaw(e.idx(t));
  e.forLoop(lo, hi, bn, [&](Value n0) {
    pinLaneCoordinates();
    Value t = e.divU(e.sub(n0, lo), bn);
    KvBuffers raw = ring(t);
    // Tile t's bytes have landed (one group a tile: those of tiles t + 1
    // .. t + ahead - 1 may still be in flight), and every warp is done
    // with tile t - 1. (The wait counts groups; any token will do.)
    waitGroups(token, ahead - 1);
    if (rawKeysDirect)
      rawKeyPairs = view(raw.k.offset, g.bn, rawKeyRowBytes(g) / 2);
    else
      dequantize(raw.k, cur.k, g.bn, g.dPad, kScale);
    dequantize(raw.v, cur.v, g.bn, g.dPad, vScale);
    gpu::BarrierOp::create(b); // the tiles are whole; raw V free
    copyRaw(e.add(t, e.idx(ahead)));
    computeTile(rows, walk, active, n0, validAt(n0));
    unpinLaneCoordinates();
  });
}

} // namespace mlir::attn::warp

bool mlir::attn::rawStagedFp8Keys(Operation *op, const TileShape &shape,
                                  Type ct, NvidiaChip chip) {
  Value q, kCache;
  if (auto unified = dyn_cast<UnifiedOp>(op)) {
    // (ALiBi slopes and a tree bias next to the raw staging spilled 16
    // bytes of a 64-row program.)
    if (unified.hasTokenScales() || unified.getAlibiSlopes() ||
        unified.getQqBias())
      return false;
    q = unified.getQ();
    kCache = unified.getKCache();
  } else if (auto prefix = dyn_cast<PrefixPrefillOp>(op)) {
    if (prefix.getAlibiSlopes())
      return false;
    q = prefix.getQ();
    kCache = prefix.getKCache();
  } else {
    return false;
  }
  Geometry g = geometryOf(shape, chip.wgmma, ct.getIntOrFloatBitWidth() / 8);
  return chip.wgmma && chip.fp8 && !ct.isF32() && !g.wgmma && g.stages == 1 &&
         !shape.producerWarps && g.dPad == shape.headDim &&
         (g.bn * g.dPad / 16) % (g.warps * kLanes) == 0 &&
         isFp8(cast<MemRefType>(kCache.getType()).getElementType()) &&
         !isFp8(cast<MemRefType>(q.getType()).getElementType());
}

bool mlir::attn::readsRawFp8KeysDirect(Operation *op, const TileShape &shape,
                                       Type ct, NvidiaChip chip) {
  return isa<UnifiedOp>(op) && rawStagedFp8Keys(op, shape, ct, chip) &&
         rawKeysFit(
             geometryOf(shape, chip.wgmma, ct.getIntOrFloatBitWidth() / 8));
}

bool mlir::attn::stagesFp8CacheAsF16(Operation *op, const TileShape &shape,
                                     Type ct, NvidiaChip chip) {
  // (attn.unified only: one paged walk, whose scales are the program's.
  // Prefix prefill's second walk, the new keys, would be staged as f16.)
  // On H100 (bench/results/2026-11-27-h100-fp8-decode-f16-tiles.md) the
  // bf16 tiles' decode (pair conversion, widening, scale, narrowing) held
  // the fp8-cache decode row at 1885 GB/s; without any decode it ran at
  // 2370.
  return isa<UnifiedOp>(op) && ct.isBF16() &&
         rawStagedFp8Keys(op, shape, ct, chip);
}

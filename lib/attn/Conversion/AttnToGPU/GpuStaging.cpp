//===- GpuStaging.cpp - global rows into shared-memory tiles --------------===//

#include "attn/Conversion/AttnToGPU/GpuStaging.h"
#include "attn/Conversion/AttnToSCF/Fp8Codec.h"
#include "attn/IR/AttnOps.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <optional>

using namespace mlir;
using namespace mlir::attn;

namespace {

/// f32 `v` as `ct` (f32 tiles take it as it is).
Value toCompute(ImplicitLocOpBuilder &b, Type ct, Value v) {
  return ct == v.getType() ? v : arith::TruncFOp::create(b, ct, v);
}
} // namespace

int64_t TileStager::chunkElems(Type tileType, int64_t rawChunkElems) {
  return isFp8(tileType) ? rawChunkElems : 8;
}

void TileStager::stage(Value dst, const TileIndex &tileAt, int64_t numRows,
                       int64_t rowElems,
                       llvm::function_ref<StagedRow(Value)> source,
                       bool transposed) {
  ImplicitLocOpBuilder &b = e.builder();
  // Chunks of 8 elements (16 bytes, or 8 of raw fp8; raw fp8 may take
  // 16), spread over the block's threads.
  Type dt = cast<MemRefType>(dst.getType()).getElementType();
  bool rawFp8 = isFp8(dt);
  int64_t chunk = chunkElems(dt, hooks.rawChunkElems);
  assert(rowElems % chunk == 0 && "rows of whole chunks");
  int64_t chunksPerRow = rowElems / chunk, total = numRows * chunksPerRow;
  int64_t iters = (total + threads - 1) / threads;
  auto vecType = VectorType::get({chunk}, dt);
  llvm::MaybeAlign chunkAlign;
  if (hooks.alignedChunks) {
    int64_t chunkBytes = 8 * dt.getIntOrFloatBitWidth() / 8;
    chunkAlign = llvm::Align(std::min<int64_t>(16, chunkBytes));
  }
  auto storeChunk = [&](Value vec, Value r, Value x0,
                        llvm::MaybeAlign align = std::nullopt) {
    if (!transposed)
      return (void)vector::StoreOp::create(b, vec, dst, tileAt(r, x0),
                                           /*nontemporal=*/false, align);
    for (int64_t i = 0; i < chunk; ++i)
      memref::StoreOp::create(b, vector::ExtractOp::create(b, vec, i), dst,
                              tileAt(r, e.add(x0, e.idx(i))));
  };

  struct Chunk {
    Value r, x0;
    StagedRow src;
    Value limit;
    bool vector;           // whether the chunk may be moved whole
    bool widen;            // or loaded as 8 bytes of fp8, decoded in registers
    Value whole;           // it may, at run time: all 8 elements exist
    SmallVector<Value> at; // source indices of element x0
  };
  auto prepare = [&](Value c, std::optional<int64_t> it = std::nullopt) {
    Chunk k;
    if (it && hooks.place) {
      std::tie(k.r, k.x0) = hooks.place(*it);
    } else {
      k.r = e.divU(c, e.idx(chunksPerRow));
      k.x0 = e.mul(e.remU(c, e.idx(chunksPerRow)), e.idx(chunk));
    }
    k.src = source(k.r);
    int64_t length = k.src.length ? k.src.length : headDim;
    k.limit = k.src.limit ? k.src.limit : e.idx(length);
    auto srcType = cast<MemRefType>(k.src.mem.getType());
    k.vector = k.widen = false;
    Type srcElem = srcType.getElementType();
    // fp8 and i8 chunks are widened in registers.
    bool fp8 = isFp8(srcElem) || srcElem.isSignlessInteger(8);
    if (k.src.chunks && (k.src.limit || length % chunk == 0) &&
        ((!k.src.scale && srcElem == dt) || fp8)) {
      SmallVector<int64_t> strides;
      int64_t offset;
      bool unit = succeeded(srcType.getStridesAndOffset(strides, offset)) &&
                  strides.back() == 1;
      k.vector = unit && srcElem == dt;
      k.widen = unit && fp8 && !k.vector;
    }
    if (k.vector || k.widen) {
      k.whole = e.andI(k.src.valid, e.le(e.add(k.x0, e.idx(chunk)), k.limit));
      k.at = k.src.at(k.x0);
    }
    return k;
  };
  // Element by element (fp8 decode, scales, strided sources, ragged ends).
  auto gather = [&](const Chunk &k) {
    // Elements of a chunk source are adjacent: one address computation.
    SmallVector<Value> base;
    if (k.src.chunks)
      base = k.at.empty() ? k.src.at(k.x0) : k.at;
    // Raw fp8 tiles take the stored byte itself; others the dequantized
    // value in the compute type. 0 outside the row.
    Type loaded = rawFp8 ? dt : b.getF32Type();
    SmallVector<Value> elems;
    for (int64_t j = 0; j < chunk; ++j) {
      Value x = e.add(k.x0, e.idx(j));
      Value ok = e.andI(k.src.valid, e.lt(x, k.limit));
      Value v = e.ifElse(
          ok, {loaded},
          [&] {
            SmallVector<Value> at;
            if (k.src.chunks) {
              at = base;
              at.back() = e.add(at.back(), e.idx(j));
            } else {
              at = k.src.at(x);
            }
            if (rawFp8)
              return SmallVector<Value>{
                  memref::LoadOp::create(b, k.src.mem, at)};
            return SmallVector<Value>{
                e.load32(k.src.mem, at, k.src.scale, k.src.quantize)};
          },
          [&] {
            return SmallVector<Value>{arith::ConstantOp::create(
                b, loaded, b.getFloatAttr(loaded, 0.0))};
          })[0];
      elems.push_back(rawFp8 ? v : toCompute(b, ct, v));
    }
    storeChunk(vector::FromElementsOp::create(b, vecType, elems), k.r, k.x0);
  };
  // A whole fp8 chunk: one 8-byte load, decoded exactly and scaled in
  // registers, stored as 16 bytes.
  auto widen = [&](const Chunk &k, Value keep = Value()) {
    Type srcElem = cast<MemRefType>(k.src.mem.getType()).getElementType();
    // (Chunks are 8-byte aligned: operands are 16-byte aligned with row
    // strides of whole chunks, which the runtime checks.)
    Value raw = vector::LoadOp::create(b, VectorType::get({8}, srcElem),
                                       k.src.mem, k.at, /*nontemporal=*/false,
                                       llvm::MaybeAlign(8));
    SmallVector<Value> decoded; // f32, exact
    if (srcElem.isSignlessInteger(8)) {
      for (int64_t j = 0; j < 8; ++j)
        decoded.push_back(arith::SIToFPOp::create(
            b, b.getF32Type(), vector::ExtractOp::create(b, raw, j)));
    } else if (hooks.decodeFp8) {
      decoded = hooks.decodeFp8(raw);
    } else {
      Value bits =
          arith::BitcastOp::create(b, VectorType::get({8}, b.getI8Type()), raw);
      for (int64_t j = 0; j < 8; ++j)
        decoded.push_back(
            emitFp8ToF32(b, srcElem, vector::ExtractOp::create(b, bits, j)));
    }
    SmallVector<Value> elems;
    for (Value v : decoded) {
      if (k.src.scale)
        v = e.mulF(v, k.src.scale);
      // (A select, not a product: an invalid row's bytes may decode to NaN.)
      if (keep)
        v = e.select(keep, v, e.f32(0.0));
      elems.push_back(toCompute(b, ct, v));
    }
    storeChunk(vector::FromElementsOp::create(b, vecType, elems), k.r, k.x0,
               chunkAlign);
  };
  // A whole chunk of the tile's type through registers.
  auto move = [&](const Chunk &k) {
    storeChunk(vector::LoadOp::create(b, vecType, k.src.mem, k.at), k.r, k.x0);
  };
  auto issue = [&](const Chunk &k) {
    // (Rows of whole chunks only: every chunk lies inside its row.)
    if (k.widen && hooks.selectRows && k.src.inRange && !k.src.limit &&
        rowElems == headDim && headDim % 8 == 0)
      return widen(k, k.src.valid);
    if (k.widen)
      return e.ifThenElse(
          k.whole, [&] { widen(k); }, [&] { gather(k); });
    if (!k.vector)
      return gather(k);
    if (!hooks.copyChunk || transposed)
      return e.ifThenElse(
          k.whole, [&] { move(k); }, [&] { gather(k); });
    if (!k.src.limit) {
      // Rows of whole chunks: a chunk is either all there or all zero. A
      // copy of 0 source bytes zero-fills, so no branch splits the walk's
      // basic block (the source index is in range either way).
      Value n = e.select(k.whole, e.idx(chunk), e.idx(0));
      hooks.copyChunk(dst, tileAt(k.r, k.x0), k.src.mem, k.at, n);
      return;
    }
    if (hooks.partialCopies) {
      // (The elements of a chunk are adjacent from k.at, which is in range
      // even for a chunk past the limit: no bytes are read there.)
      Value n = e.max(e.min(e.sub(k.limit, k.x0), e.idx(chunk)), e.idx(0));
      n = e.select(k.src.valid, n, e.idx(0));
      hooks.copyChunk(dst, tileAt(k.r, k.x0), k.src.mem, k.at, n);
      return;
    }
    // 16 bytes straight from global memory into shared memory, or the
    // ragged end element by element.
    auto ifOp = scf::IfOp::create(b, k.whole, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    hooks.copyChunk(dst, tileAt(k.r, k.x0), k.src.mem, k.at, Value());
    b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
    gather(k);
  };

  if (total % threads == 0 && iters <= 32) {
    // Unrolled, with every chunk's address (block-table reads included)
    // computed before the first copy: the reads overlap instead of each
    // waiting behind the previous copy.
    SmallVector<Chunk> chunks;
    for (int64_t it = 0; it < iters; ++it)
      chunks.push_back(prepare(e.add(tid, e.idx(it * threads)), it));
    for (const Chunk &k : chunks)
      issue(k);
    return;
  }
  // (Three steps or more: at two, half the tile under the test, it ran
  // slower on H200, prefix prefill over an fp8 cache with heads of 160.)
  if (hooks.unrollRaggedTail && iters >= 3 && iters <= 32) {
    // The same, row-major, for the iterations every thread takes; the last
    // (some threads only) is addressed and issued under its test.
    SmallVector<Chunk> chunks;
    for (int64_t it = 0; it + 1 < iters; ++it)
      chunks.push_back(prepare(e.add(tid, e.idx(it * threads))));
    for (const Chunk &k : chunks)
      issue(k);
    Value c = e.add(tid, e.idx((iters - 1) * threads));
    e.ifThen(e.lt(c, e.idx(total)), [&] { issue(prepare(c)); });
    return;
  }
  e.forLoop(0, iters, [&](Value it) {
    Value c = e.add(tid, e.mul(it, e.idx(threads)));
    e.ifThen(e.lt(c, e.idx(total)), [&] { issue(prepare(c)); });
  });
}

StagedRow KvTileRows::key(Value r, bool isK, bool scaled) const {
  Value k = nValid ? e.min(e.add(n0, r), lastKey) : e.add(n0, r);
  KeyRow kr = walk.locate(e, k);
  StagedRow s;
  s.valid = nValid ? e.lt(r, nValid) : e.boolean(true);
  s.inRange = true; // (the key is clamped to the range's last)
  s.mem = isK ? kr.k : kr.v;
  s.at = isK ? kr.kAt : kr.vAt;
  s.scale = !scaled ? Value() : isK ? kr.kScale : kr.vScale;
  s.quantize = scaled ? kr.quantize : Type();
  s.chunks = isK ? kr.kChunks : kr.vChunks;
  return s;
}

StagedRow KvTileRows::valueColumn(Value d, int64_t keys) const {
  assert((nValid || keys) && "a full tile's column needs its length");
  StagedRow s;
  s.valid = e.lt(d, e.idx(headDim));
  KeyRow first = walk.locate(e, n0);
  s.mem = first.v;
  // (Key-major walks have one scale for every key.)
  s.scale = first.vScale;
  s.quantize = first.quantize;
  // (Copies: the row outlives this helper.)
  LoopEmitter *em = &e;
  const KvWalk *w = &walk;
  Value start = n0, last = lastKey;
  s.at = [=](Value x) {
    Value key = em->add(start, x);
    return w->locate(*em, last ? em->min(key, last) : key).vAt(d);
  };
  s.chunks = true;
  s.limit = nValid;
  s.length = keys;
  return s;
}

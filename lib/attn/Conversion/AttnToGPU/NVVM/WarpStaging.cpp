//===- WarpStaging.cpp - shared-memory tiles of warp programs -------------===//
//
// Shared-memory tiles of the warp program (WarpProgram.h): plain tiles
// with a padded stride for ldmatrix or 128-byte swizzled ones for wgmma,
// their 16-byte cp.async (or gathered, dequantized) staging, and the
// lane coordinates of a tile.
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

Geometry geometryOf(const TileShape &s, bool wgmma, int64_t elemBytes) {
  Geometry g;
  g.chunk = 16 / elemBytes;
  int64_t rows16 = llvm::alignTo(s.rows(), 16);
  g.warps = s.warps > 0 ? s.warps : rows16 / 16;
  g.dPad = llvm::alignTo(s.headDim, 16);
  g.stride = g.dPad + g.chunk;
  g.bn = llvm::alignTo(s.blockN, 16);
  // More warps than 16-row slabs split the keys of each tile (whole k
  // steps of PV each) on the mma.sync programs of 16-bit and fp8 tiles;
  // elsewhere the extra warps pad the M tile.
  int64_t slabs = rows16 / 16;
  if (g.warps > slabs && g.warps % slabs == 0 && elemBytes == 2 &&
      !s.producerWarps && !s.tma && g.bn % (16 * (g.warps / slabs)) == 0)
    g.keyWarps = g.warps / slabs;
  int64_t rowWarps = g.warps / g.keyWarps;
  g.mFrags = std::max<int64_t>(1, (slabs + rowWarps - 1) / rowWarps);
  g.mRows = rowWarps * 16 * g.mFrags;
  g.vtStride = g.bn + g.chunk;
  // Prefill tiles (128 rows) double-buffer K and V: one barrier per KV tile
  // instead of four. Smaller (decode) programs keep one buffer unless the
  // schedule asks for two (attn-plan: sm_90a unified programs, whose
  // warpgroup then multiplies on wgmma). A producer warpgroup's TMA ring
  // is two deep for any tile (block-sparse programs of one 64-row
  // warpgroup).
  g.stages = s.stages ? s.stages : g.mRows >= 128 || s.producerWarps ? 2 : 1;
  // Whole warpgroups of one fragment per warp on the double-buffered walk,
  // and tiles of whole swizzle atoms (N of an MMA is at most 256). K and V
  // tiles that TMA fills for a producer warpgroup are [bn, D] (D in atoms;
  // their keys are rows, V never transposed), so there bn only has to be
  // whole k steps of PV: 80 keys for heads of 256, as FlashAttention-3.
  int64_t keyUnit = s.tma && s.producerWarps ? 16 : wgmma::kAtomCols;
  g.wgmma = wgmma && elemBytes == 2 && g.keyWarps == 1 && g.warps % 4 == 0 &&
            g.mFrags == 1 && g.stages >= 2 && g.dPad % wgmma::kAtomCols == 0 &&
            g.bn % keyUnit == 0 && g.dPad <= 256 && g.bn <= 256;
  if (g.wgmma) {
    g.stride = g.dPad;
    g.vtStride = g.bn;
  }
  return g;
}

void WarpAttentionBuilder::setUpThreads() {
  tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  lane = e.remU(tid, e.idx(kLanes));
  warp = e.divU(tid, e.idx(kLanes));
  quadRow = e.divU(lane, e.idx(4));
  quadCol = e.remU(lane, e.idx(4));
  warpRow0 = e.mul(e.divU(warp, e.idx(g.keyWarps)), e.idx(g.warpRows()));
  warpKey0 = e.mul(e.remU(warp, e.idx(g.keyWarps)), e.idx(g.warpKeys()));
}

Value WarpAttentionBuilder::pinned(Value index) {
  // Every shared-memory address of a tile is a lane offset plus a constant.
  // Left loop-invariant, LLVM hoists each sum out of the KV loop into its
  // own register (about 80 of them), and the kernel spills; a copy through
  // a side-effecting mov keeps them in the loop, where they fold into the
  // ldmatrix immediate offsets.
  Type i32 = b.getI32Type();
  Value v = arith::IndexCastOp::create(b, i32, index);
  Value r = inlinePtx(b, i32, ValueRange{v}, "mov.b32 $0, $1;", "=r,r");
  return arith::IndexCastOp::create(b, b.getIndexType(), r);
}

void WarpAttentionBuilder::pinLaneCoordinates(bool staging) {
  unpinned = {lane, quadRow, quadCol, warpRow0, warpKey0};
  lane = pinned(lane);
  quadRow = e.divU(lane, e.idx(4));
  quadCol = e.remU(lane, e.idx(4));
  warpRow0 = pinned(warpRow0);
  if (g.keyWarps > 1)
    warpKey0 = pinned(warpKey0);
  unpinnedStaging = {tid, tilesAddress};
  if (staging) {
    tid = pinned(tid);
    if (tilesAddress)
      tilesAddress = pinned(tilesAddress);
  }
}

void WarpAttentionBuilder::unpinLaneCoordinates() {
  std::tie(lane, quadRow, quadCol, warpRow0, warpKey0) = unpinned;
  std::tie(tid, tilesAddress) = unpinnedStaging;
}

Value WarpAttentionBuilder::view(Value offset, int64_t numRows,
                                 int64_t rowStride, Type elem) {
  auto space =
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  auto type = MemRefType::get({numRows, rowStride}, elem ? elem : ct,
                              MemRefLayoutAttrInterface(), space);
  Value bytes = e.mul(offset, e.idx(ct.getIntOrFloatBitWidth() / 8));
  if (alignPad)
    bytes = e.add(bytes, alignPad);
  return memref::ViewOp::create(b, type, shared, bytes, ValueRange{});
}

SharedTile WarpAttentionBuilder::tile(Value offset, int64_t rows, int64_t cols,
                                      int64_t stride,
                                      std::optional<TileLayout> layout) {
  SharedTile t;
  t.offset = offset;
  t.rows = rows;
  t.layout = layout    ? *layout
             : g.wgmma ? TileLayout::Swizzled
                       : TileLayout::Padded;
  switch (t.layout) {
  case TileLayout::Padded:
    t.mem = view(offset, rows, stride);
    break;
  case TileLayout::Swizzled:
    // The atoms of a row's stride: the head's, or those of its fp8 bytes
    // (fp8WgmmaGeometry).
    t.mem = view(offset, stride / wgmma::kAtomCols * rows, wgmma::kAtomCols);
    break;
  case TileLayout::CoreMatrices:
  case TileLayout::Swizzled32:
    assert(g.wgmma && "wgmma operand layouts");
    t.mem = view(offset, cols / 8 * rows, 8);
    break;
  }
  return t;
}

SharedTile WarpAttentionBuilder::bytesOf(const SharedTile &t, Type elem) {
  assert(t.layout == TileLayout::Padded && "raw fp8 tiles are plain");
  SharedTile raw = t;
  raw.mem = view(t.offset, t.rows, 2 * g.stride, elem);
  return raw;
}

SmallVector<Value> WarpAttentionBuilder::tileAt(const SharedTile &t, Value r,
                                                Value x0) {
  switch (t.layout) {
  case TileLayout::Padded:
    return {r, x0};
  case TileLayout::CoreMatrices: {
    Value unit = e.idx(t.unit);
    return {e.add(e.mul(e.divU(x0, unit), e.idx(t.rows)), r), e.remU(x0, unit)};
  }
  case TileLayout::Swizzled32: {
    // (16-byte units: step x0 / 16 of 2 rows each, the half swizzled.)
    Value chunk = e.divU(x0, e.idx(8));
    Value step = e.divU(chunk, e.idx(2));
    Value half = arith::XOrIOp::create(b, e.remU(chunk, e.idx(2)),
                                       e.remU(e.divU(r, e.idx(4)), e.idx(2)));
    return {e.add(e.mul(e.add(e.mul(step, e.idx(t.rows)), r), e.idx(2)), half),
            e.idx(0)};
  }
  case TileLayout::Swizzled:
    break;
  }
  // (Eight chunks an atom's row: of 8 elements, or of 16 raw fp8 bytes.)
  Value atomCols = e.idx(8 * t.unit);
  Value atom = e.divU(x0, atomCols);
  Value inAtom = e.divU(e.remU(x0, atomCols), e.idx(t.unit));
  Value swizzled = arith::XOrIOp::create(b, inAtom, e.remU(r, e.idx(8)));
  return {e.add(e.mul(atom, e.idx(t.rows)), r), e.mul(swizzled, e.idx(t.unit))};
}

Value WarpAttentionBuilder::tileAddress(const SharedTile &t, int64_t bytes) {
  Value elemBytes = e.idx(ct.getIntOrFloatBitWidth() / 8);
  return e.add(e.add(tilesAddress, e.mul(t.offset, elemBytes)), e.idx(bytes));
}

void WarpAttentionBuilder::stage(const SharedTile &dst, int64_t numRows,
                                 int64_t rowElems,
                                 llvm::function_ref<StagedRow(Value)> source,
                                 ChunkOrder order, bool unrollTail,
                                 int64_t rawChunk) {
  TileStager::Hooks hooks;
  int64_t chunk = TileStager::chunkElems(
      cast<MemRefType>(dst.mem.getType()).getElementType(), rawChunk);
  hooks.rawChunkElems = rawChunk;
  hooks.place = placement(order, numRows, rowElems / chunk, chunk);
  // Whole chunks: 16 bytes (8 or 16 of raw fp8) with cp.async, which
  // bypasses L1 only for 16-byte copies. A chunk of 8 f32 is two copies of
  // 16 bytes.
  hooks.copyChunk = [&, chunk](Value dstMem, ValueRange dstAt, Value src,
                               ValueRange srcAt, Value count) {
    Type dt = cast<MemRefType>(dstMem.getType()).getElementType();
    UnitAttr bypassL1 = isFp8(dt) && chunk < 16 ? UnitAttr() : b.getUnitAttr();
    auto tokenType = nvgpu::DeviceAsyncTokenType::get(b.getContext());
    if (!dt.isF32())
      return (void)nvgpu::DeviceAsyncCopyOp::create(
          b, tokenType, dstMem, dstAt, src, srcAt, b.getIndexAttr(chunk), count,
          bypassL1);
    // (count is 8 or 0: whole chunks or none.)
    Value half = count ? e.divU(count, e.idx(2)) : Value();
    for (int64_t h = 0; h < 2; ++h) {
      SmallVector<Value> d(dstAt), s(srcAt);
      d.back() = e.add(d.back(), e.idx(4 * h));
      s.back() = e.add(s.back(), e.idx(4 * h));
      nvgpu::DeviceAsyncCopyOp::create(b, tokenType, dstMem, d, src, s,
                                       b.getIndexAttr(4), half, bypassL1);
    }
  };
  if (chip.fp8)
    hooks.decodeFp8 = [&](Value raw) { return decodeFp8(raw); };
  // The gathering producer's staging is copies only; fp8 chunks go out
  // without a branch each.
  hooks.partialCopies = producerStaging;
  hooks.selectRows = true;
  hooks.alignedChunks = true;
  // (Measured on H200 only: prefix prefill over an fp8 cache, heads of 80
  // and 112, 32-key tiles of 2.5 and 3.5 chunks a thread, 1.11-1.19x;
  // over a bf16 cache, whose chunks are copies, a head of 112 lost 4%.)
  hooks.unrollRaggedTail = chip.wgmma && unrollTail;
  TileStager(e, tid, threads, shape.headDim, ct, std::move(hooks))
      .stage(
          dst.mem, [&](Value r, Value x0) { return tileAt(dst, r, x0); },
          numRows, rowElems, source);
}

/// The exact f16 pair (i32) of two fp8 bytes (i16), by the hardware
/// conversion (sm_89+; exact: every fp8 value is an f16).
static Value convertFp8Pair(ImplicitLocOpBuilder &b, Value pair, Type fp8Type) {
  std::string cvt = isa<Float8E4M3FNType>(fp8Type)
                        ? "cvt.rn.f16x2.e4m3x2 $0, $1;"
                        : "cvt.rn.f16x2.e5m2x2 $0, $1;";
  return inlinePtx(b, b.getI32Type(), ValueRange{pair}, cvt, "=r,h",
                   /*sideEffects=*/false);
}

/// `raw` (vector<2n x fp8>) as n pairs of bytes (i16 each).
static Value bytePairs(ImplicitLocOpBuilder &b, Value raw) {
  int64_t n = cast<VectorType>(raw.getType()).getNumElements();
  return vector::BitCastOp::create(b, VectorType::get({n / 2}, b.getI16Type()),
                                   raw);
}

SmallVector<Value> WarpAttentionBuilder::decodeFp8Pairs(Value raw) {
  Type fp8Type = cast<VectorType>(raw.getType()).getElementType();
  Value pairs = bytePairs(b, raw);
  SmallVector<Value> decoded;
  for (int64_t j = 0; j < cast<VectorType>(pairs.getType()).getNumElements();
       ++j)
    decoded.push_back(
        convertFp8Pair(b, vector::ExtractOp::create(b, pairs, j), fp8Type));
  return decoded;
}

SmallVector<Value> WarpAttentionBuilder::decodeFp8(Value raw) {
  Type fp8Type = cast<VectorType>(raw.getType()).getElementType();
  Value pairs = bytePairs(b, raw);
  SmallVector<Value> decoded;
  for (int64_t j = 0; j < cast<VectorType>(pairs.getType()).getNumElements();
       ++j) {
    Value h2 =
        convertFp8Pair(b, vector::ExtractOp::create(b, pairs, j), fp8Type);
    Value halves = vector::BitCastOp::create(
        b, VectorType::get({2}, b.getF16Type()),
        vector::FromElementsOp::create(b, VectorType::get({1}, b.getI32Type()),
                                       ValueRange{h2}));
    for (int64_t i = 0; i < 2; ++i)
      decoded.push_back(arith::ExtFOp::create(
          b, b.getF32Type(), Value(vector::ExtractOp::create(b, halves, i))));
  }
  return decoded;
}

SharedTile WarpAttentionBuilder::swizzledRawTile(Value offset, int64_t rows,
                                                 int64_t cols) {
  SharedTile t;
  t.offset = offset;
  t.rows = rows;
  t.unit = 16;
  t.layout = TileLayout::Swizzled;
  t.mem = view(offset, cols / wgmma::kAtomRowBytes * rows, wgmma::kAtomRowBytes,
               walkKeyType);
  return t;
}

WarpAttentionBuilder::KvBuffers WarpAttentionBuilder::rawBuffers(Value slot) {
  // After the K/V ring: two slots of raw K and V (V^T for key-major
  // caches), bn * dPad bytes each (offsets in compute-type elements, as
  // every tile's). Chunks of 16 bytes in core matrices: raw K keeps the
  // fp8 split-x cache's runs of 16 dims per key, raw V^T the [D, page]
  // cache's 16 keys per dim; an NHD cache's rows are whole runs.
  int64_t rawElems = g.bn * g.dPad / (ct.getIntOrFloatBitWidth() / 8);
  Value base = e.add(e.idx(g.mRows * g.stride + kvTileElems(g, rawKeysDirect)),
                     e.mul(slot, e.idx(2 * rawElems)));
  auto raw = [&](Value offset, int64_t rows, int64_t cols) {
    // (Page boxes by TMA write 128-byte swizzled rows: 1024-byte aligned,
    // as the ring before them.)
    if (rawPagesByTma)
      return swizzledRawTile(offset, rows, cols);
    SharedTile t;
    t.offset = offset;
    t.rows = rows;
    t.unit = 16;
    t.layout = TileLayout::CoreMatrices;
    t.mem = view(offset, cols / 16 * rows, 16, walkKeyType);
    return t;
  };
  // (NHD caches, whose V rows are keys: raw V as [bn, D] rows, like K.)
  SharedTile k = raw(base, g.bn, g.dPad);
  Value vBase = e.add(base, e.idx(rawElems));
  return {k, raw(vBase, g.bn, g.dPad), raw(vBase, g.dPad, g.bn)};
}

WarpAttentionBuilder::KvBuffers WarpAttentionBuilder::rawRing(Value keySlot,
                                                              Value valueSlot) {
  // QK may read K raw with ldmatrix (rawKeyOperands), eight rows of 16
  // bytes at a time, which a stride of whole 128-byte lines would put in
  // the same banks. Rows of whole lines (heads of 128 and 256) swizzle
  // their 16-byte chunks by the row instead (rawKeysSwizzled); others are
  // padded by kRawKeyPad bytes. (Padded to 144 bytes, a row's 16-byte
  // cp.async copies straddled two lines: 2.6 times the ideal shared
  // wavefronts on an H200, bench/results/2026-11-30-h200-session25.md.)
  // Slot s of both is K then V, at s (K + V); the extra K slot (where QK
  // reads K raw) follows the last V.
  int64_t elemBytes = ct.getIntOrFloatBitWidth() / 8;
  int64_t kElems = g.bn * rawKeyRowBytes(g) / elemBytes;
  int64_t slotElems = kElems + g.bn * g.dPad / elemBytes;
  Value base = e.idx(g.mRows * g.stride + kvTileElems(g, rawKeysDirect));
  auto rowsOf = [&](Value offset, int64_t stride) {
    SharedTile t;
    t.offset = offset;
    t.rows = g.bn;
    t.mem = view(offset, g.bn, stride, walkKeyType);
    return t;
  };
  Value kOffset = e.add(base, e.mul(keySlot, e.idx(slotElems)));
  return {rawKeysSwizzled(g) ? swizzledRawTile(kOffset, g.bn, g.dPad)
                             : rowsOf(kOffset, rawKeyRowBytes(g)),
          rowsOf(e.add(e.add(base, e.idx(kElems)),
                       e.mul(valueSlot, e.idx(slotElems))),
                 g.dPad),
          SharedTile()};
}

void WarpAttentionBuilder::dequantize(const SharedTile &raw,
                                      const SharedTile &dst, int64_t rows,
                                      int64_t cols, Value scale, bool asF16,
                                      Value signs, int64_t loadsAhead) {
  // Thread t takes unit q = t + i * threads of the [rows, cols / 16] units,
  // going down the columns (row q % rows): a warp's 16-byte reads of raw
  // fp8 are 512 contiguous bytes, and its writes of a unit's 32 bytes of
  // the compute type fill whole core-matrix columns or 32-byte steps.
  // Loads in batches of `loadsAhead`, ahead of their decodes.
  int64_t units = rows * cols / 16;
  assert(units % threads == 0 && "whole units per thread");
  Value t = e.remU(tid, e.idx(threads));
  Type rawType = cast<MemRefType>(raw.mem.getType()).getElementType();
  int64_t iters = units / threads;
  // Swizzled raw tiles (fp8 pages by TMA), four loads ahead: down the
  // columns each unit has an address of its own, and eight of them beside
  // the producer's 56 registers spilled 28-40 bytes (on H200, fp8 prefill
  // rows ran 1.05x faster spilled, 1.08-1.10x not; four ahead along the
  // rows was level with eight: bench/results/2026-11-30-h200-session25.md).
  if (raw.layout == TileLayout::Swizzled)
    loadsAhead = std::min<int64_t>(loadsAhead, 4);
  // Plain rows of eight units (heads of 128) into plain rows whose stride
  // is an odd number of 16-byte chunks (the mma.sync tiles' 272 bytes):
  // eight lanes along one row wrote units u and u + 4 to the same banks
  // (ncu: twice the ideal wavefronts a store). Lanes 0-3 of each eight take
  // units 0-3 of one row and lanes 4-7 units 4-7 of the next (in the other
  // eight of a pair of rows, the other way round): the next row's stride
  // moves its halves onto the other banks, and raw rows of 128 bytes read
  // a different half line each.
  auto strideBytes = [](const SharedTile &tile) {
    auto type = cast<MemRefType>(tile.mem.getType());
    return type.getDimSize(1) * type.getElementTypeBitWidth() / 8;
  };
  bool rowPairs = raw.layout == TileLayout::Padded &&
                  dst.layout == TileLayout::Padded && cols == 128 &&
                  rows % 2 == 0 && threads % 16 == 0 &&
                  strideBytes(raw) == 128 && strideBytes(dst) % 32 == 16;
  // (Other plain raw rows: a warp's reads go along two or four rows. Not
  // 128-byte swizzled ones: 16-byte accesses are served eight lanes at a
  // time, and eight lanes along one row wrote both atoms' halves of its
  // unit to the same four swizzled chunks, two lanes a bank; down the
  // columns, eight rows' units land on eight chunks, read and written.)
  bool along = raw.layout == TileLayout::Padded;
  // Row and first column of unit q.
  auto unitAt = [&](Value q) -> std::pair<Value, Value> {
    if (rowPairs) {
      Value j = e.remU(q, e.idx(8));
      Value flip = arith::XOrIOp::create(b, e.divU(j, e.idx(4)),
                                         e.remU(e.divU(q, e.idx(8)), e.idx(2)));
      return {e.add(e.mul(e.divU(q, e.idx(16)), e.idx(2)), flip),
              e.mul(j, e.idx(16))};
    }
    if (along)
      return {e.divU(q, e.idx(cols / 16)),
              e.mul(e.remU(q, e.idx(cols / 16)), e.idx(16))};
    return {e.remU(q, e.idx(rows)), e.mul(e.divU(q, e.idx(rows)), e.idx(16))};
  };
  for (int64_t first = 0; first < iters; first += loadsAhead) {
    SmallVector<std::tuple<Value, Value, Value>> batch;
    for (int64_t it = first; it < std::min(iters, first + loadsAhead); ++it) {
      auto [r, x0] = unitAt(e.add(t, e.idx(it * threads)));
      Value bytes = vector::LoadOp::create(
          b, VectorType::get({16}, rawType), raw.mem, tileAt(raw, r, x0),
          /*nontemporal=*/false, llvm::MaybeAlign(16));
      batch.emplace_back(r, x0, bytes);
    }
    // (16 bytes at a 16-byte boundary, said so: where LLVM cannot see it
    // through a swizzle, it splits the store into 2-byte ones, each a
    // 4-way bank conflict.)
    auto storeHalf = [&](Value eight, Value r, Value x0, int64_t h) {
      vector::StoreOp::create(b, eight, dst.mem,
                              tileAt(dst, r, e.add(x0, e.idx(8 * h))),
                              /*nontemporal=*/false, llvm::MaybeAlign(16));
    };
    for (auto [r, x0, bytes] : batch) {
      if (signs) {
        auto words = VectorType::get({4}, b.getI32Type());
        bytes = vector::BitCastOp::create(
            b, bytes.getType(),
            arith::XOrIOp::create(
                b, vector::BitCastOp::create(b, words, bytes),
                vector::BroadcastOp::create(b, words, signs)));
      }
      if (asF16) {
        // (The tile's element type is the compute type's; the bits are
        // f16, read as such by PV: see f16CacheValues.)
        SmallVector<Value> pairs = decodeFp8Pairs(bytes);
        for (int64_t h = 0; h < 2; ++h) {
          Value words = vector::FromElementsOp::create(
              b, VectorType::get({4}, b.getI32Type()),
              ArrayRef<Value>(pairs).slice(4 * h, 4));
          storeHalf(
              vector::BitCastOp::create(b, VectorType::get({8}, ct), words), r,
              x0, h);
        }
        continue;
      }
      SmallVector<Value> values = decodeFp8(bytes);
      for (int64_t h = 0; h < 2; ++h) {
        SmallVector<Value> elems;
        for (int64_t i = 0; i < 8; ++i) {
          Value v = values[8 * h + i];
          if (scale)
            v = e.mulF(v, scale);
          elems.push_back(arith::TruncFOp::create(b, ct, v));
        }
        storeHalf(
            vector::FromElementsOp::create(b, VectorType::get({8}, ct), elems),
            r, x0, h);
      }
    }
  }
}

Value WarpAttentionBuilder::commitGroup() {
  // Always a group (possibly empty), so that wait counts are static.
  auto tokenType = nvgpu::DeviceAsyncTokenType::get(b.getContext());
  return nvgpu::DeviceAsyncCreateGroupOp::create(b, tokenType, ValueRange{});
}

void WarpAttentionBuilder::waitGroups(Value token, int32_t pending) {
  nvgpu::DeviceAsyncWaitOp::create(b, token, b.getI32IntegerAttr(pending));
  // The tensor cores read the staged tiles through the async proxy.
  if (g.wgmma)
    wgmma::fenceProxyAsync(b);
  syncComputeThreads();
}

WarpAttentionBuilder::KvBuffers
WarpAttentionBuilder::kvBuffers(Value stage, bool splitKeys) {
  Value base =
      e.add(e.idx(g.mRows * g.stride), e.mul(stage, e.idx(g.kvElems())));
  // (QK reading K raw leaves the K tile unused: V takes its place.)
  Value vBase = rawKeysDirect ? base : e.add(base, e.idx(g.bn * g.stride));
  // The gathering producer keeps the layouts of vLLM's caches so that each
  // 32-byte sector it copies lands on 32 contiguous bytes (a cp.async warp
  // instruction otherwise takes a shared wavefront and an L2 sector per
  // lane): the split-x K cache in core matrices, the [D, page] V cache in
  // 32-byte swizzled k steps. Row-major tiles (the new tokens' K and V,
  // unified's NHD pages) stay 128-byte swizzled, which keeps a row's 128
  // bytes together.
  std::optional<TileLayout> kLayout, vtLayout;
  if (gather) {
    if (splitKeys)
      kLayout = TileLayout::CoreMatrices;
    vtLayout = TileLayout::Swizzled32;
  }
  return {tile(base, g.bn, g.dPad, g.stride, kLayout),
          tile(vBase, g.bn, g.dPad, g.stride),
          tile(vBase, g.dPad, g.bn, g.vtStride, vtLayout)};
}

std::function<std::pair<Value, Value>(int64_t)>
WarpAttentionBuilder::placement(ChunkOrder order, int64_t rows, int64_t cols,
                                int64_t chunk) {
  // (Captured by value: the staging outlives this frame's locals.)
  LoopEmitter *em = &e;
  int64_t n = threads;
  // (tid mod n: LLVM then knows each chunk's row and column bounds, and
  // folds the in-tile tests of whole copies, whose zero-filling form takes
  // twice the shared wavefronts.)
  Value t = e.remU(tid, e.idx(n));
  switch (order) {
  case ChunkOrder::RowMajor:
    return {};
  case ChunkOrder::Rows:
    // Chunk q = t + it * n at row q % rows, column q / rows: with as many
    // threads as rows, thread t stages row t whole (a row of the split-x
    // cache located once), and a warp's copies of one chunk column are two
    // pages' 256 contiguous bytes, landing on 512 contiguous bytes of a
    // core-matrix tile.
    if (rows % n && n % rows)
      return {};
    return [=](int64_t it) {
      Value q = em->add(t, em->idx(it * n));
      return std::make_pair(
          em->remU(q, em->idx(rows)),
          em->mul(em->divU(q, em->idx(rows)), em->idx(chunk)));
    };
  case ChunkOrder::RowPairs: {
    // Thread t stages chunks 2j + t % 2 of its rows: each 8 lanes read 4
    // rows' 16 contiguous bytes (raw fp8 split-x K: one cache run each).
    int64_t pairs = n / 2;
    if (n % 2 || rows % pairs || cols % 2 || rows * cols % n)
      return {};
    return [=](int64_t it) {
      int64_t q = pairs * it;
      Value r = em->add(em->divU(t, em->idx(2)), em->idx(q % rows));
      Value c = em->add(em->remU(t, em->idx(2)), em->idx(2 * (q / rows)));
      return std::make_pair(r, em->mul(c, em->idx(chunk)));
    };
  }
  case ChunkOrder::ColumnPairs: {
    // V^T of a key-major walk ([D, keys], chunks of 8 or 16 keys of one
    // page): thread t keeps the pair of chunk columns 2 (t / k) + {0, 1},
    // k = the threads per pair, so it looks its pages up once; its
    // neighbour takes the other chunk of its row, so that each 8 threads
    // (a phase of a 16-byte access) read 128 contiguous bytes of the cache
    // (4 dims of 16 keys) and write 4 rows of a 32-byte swizzled k step.
    int64_t colPairs = cols / 2;
    if (cols % 2 || n % colPairs)
      return {};
    int64_t perPair = n / colPairs;
    if (perPair % 2 || rows % (perPair / 2))
      return {};
    return [=](int64_t it) {
      Value within = em->remU(t, em->idx(perPair));
      Value r =
          em->add(em->divU(within, em->idx(2)), em->idx(perPair / 2 * it));
      Value c = em->add(em->mul(em->divU(t, em->idx(perPair)), em->idx(2)),
                        em->remU(t, em->idx(2)));
      return std::make_pair(r, em->mul(c, em->idx(chunk)));
    };
  }
  }
  llvm_unreachable("unknown chunk order");
}

void WarpAttentionBuilder::stageValues(const KvWalk &walk, const KvBuffers &buf,
                                       Value n0, Value nValid) {
  if (walk.valueKeyMajor)
    stageValuesTransposed(walk, buf.vt, n0, nValid ? nValid : e.idx(g.bn));
  else
    stageKeys(walk, buf.v, n0, nValid, false);
}

void WarpAttentionBuilder::stageKeys(const KvWalk &walk, const SharedTile &dst,
                                     Value n0, Value nValid, bool isK) {
  KvTileRows tile(e, walk, n0, nValid, shape.headDim);
  bool raw = isK && qk8;
  // Core-matrix tiles (the gathering producer's paged K): a row's chunks
  // in one thread, one block-table read per key; vLLM's split-x K cache
  // holds a chunk of 16 consecutive keys' rows contiguously, so a warp's
  // copies of one chunk column read and write 512 contiguous bytes.
  // The gathering producer's rows of a paged walk (unified's NHD pages):
  // adjacent lanes copy the two halves of a 32-byte sector, which the
  // 128-byte swizzle keeps together, and a thread's chunks lie in two rows,
  // located once each (row-major chunks located 16 rows a thread, and the
  // producer's 56 registers spilled 324 bytes).
  ChunkOrder order = dst.layout == TileLayout::CoreMatrices ? ChunkOrder::Rows
                     : gather && walk.paged ? ChunkOrder::RowPairs
                                            : ChunkOrder::RowMajor;
  stage(
      raw ? bytesOf(dst, kType) : dst, g.bn, g.dPad,
      [&](Value r) { return tile.key(r, isK, /*scaled=*/!raw); }, order,
      /*unrollTail=*/decodesWalks);
}

void WarpAttentionBuilder::stageValuesTransposed(const KvWalk &walk,
                                                 const SharedTile &dst,
                                                 Value n0, Value nValid) {
  KvTileRows tile(e, walk, n0, nValid, shape.headDim);
  stage(
      dst, g.dPad, g.bn, [&](Value d) { return tile.valueColumn(d, g.bn); },
      dst.layout == TileLayout::Swizzled32 ? ChunkOrder::ColumnPairs
                                           : ChunkOrder::RowMajor,
      /*unrollTail=*/decodesWalks);
}

} // namespace mlir::attn::warp

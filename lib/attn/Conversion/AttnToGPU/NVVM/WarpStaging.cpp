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
  g.mFrags = std::max<int64_t>(1, (rows16 / 16 + g.warps - 1) / g.warps);
  g.mRows = g.warps * 16 * g.mFrags;
  g.dPad = llvm::alignTo(s.headDim, 16);
  g.stride = g.dPad + g.chunk;
  g.bn = llvm::alignTo(s.blockN, 16);
  g.vtStride = g.bn + g.chunk;
  // Prefill tiles (128 rows) double-buffer K and V: one barrier per KV tile
  // instead of four. Smaller (decode) programs keep one buffer, so that more
  // of them fit on an SM. A producer warpgroup's TMA ring is two deep
  // for any tile (block-sparse programs of one 64-row warpgroup).
  g.stages = g.mRows >= 128 || s.producerWarps ? 2 : 1;
  // Whole warpgroups of one fragment per warp on the double-buffered walk,
  // and tiles of whole swizzle atoms (N of an MMA is at most 256).
  g.wgmma = wgmma && elemBytes == 2 && g.warps % 4 == 0 && g.mFrags == 1 &&
            g.stages == 2 && g.dPad % wgmma::kAtomCols == 0 &&
            g.bn % wgmma::kAtomCols == 0 && g.dPad <= 256 && g.bn <= 256;
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
  warpRow0 = e.mul(warp, e.idx(g.warpRows()));
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
  unpinned = {lane, quadRow, quadCol, warpRow0};
  lane = pinned(lane);
  quadRow = e.divU(lane, e.idx(4));
  quadCol = e.remU(lane, e.idx(4));
  warpRow0 = pinned(warpRow0);
  unpinnedStaging = {tid, tilesAddress};
  if (staging) {
    tid = pinned(tid);
    if (tilesAddress)
      tilesAddress = pinned(tilesAddress);
  }
}

void WarpAttentionBuilder::unpinLaneCoordinates() {
  std::tie(lane, quadRow, quadCol, warpRow0) = unpinned;
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
                                      int64_t stride) {
  SharedTile t;
  t.offset = offset;
  t.rows = rows;
  t.swizzled = g.wgmma;
  t.mem = g.wgmma
              ? view(offset, cols / wgmma::kAtomCols * rows, wgmma::kAtomCols)
              : view(offset, rows, stride);
  return t;
}

SharedTile WarpAttentionBuilder::bytesOf(const SharedTile &t, Type elem) {
  assert(!t.swizzled && "raw fp8 tiles are plain");
  SharedTile raw = t;
  raw.mem = view(t.offset, t.rows, 2 * g.stride, elem);
  return raw;
}

SmallVector<Value> WarpAttentionBuilder::tileAt(const SharedTile &t, Value r,
                                                Value x0) {
  if (!t.swizzled)
    return {r, x0};
  Value atomCols = e.idx(wgmma::kAtomCols);
  Value atom = e.divU(x0, atomCols);
  Value chunk = e.divU(e.remU(x0, atomCols), e.idx(8));
  Value swizzled = arith::XOrIOp::create(b, chunk, e.remU(r, e.idx(8)));
  return {e.add(e.mul(atom, e.idx(t.rows)), r), e.mul(swizzled, e.idx(8))};
}

Value WarpAttentionBuilder::tileAddress(const SharedTile &t, int64_t bytes) {
  Value elemBytes = e.idx(ct.getIntOrFloatBitWidth() / 8);
  return e.add(e.add(tilesAddress, e.mul(t.offset, elemBytes)), e.idx(bytes));
}

void WarpAttentionBuilder::stage(const SharedTile &dst, int64_t numRows,
                                 int64_t rowElems,
                                 llvm::function_ref<StagedRow(Value)> source) {
  TileStager::Hooks hooks;
  // Whole chunks: 16 bytes (8 of raw fp8) with cp.async, which bypasses L1
  // only for 16-byte copies. A chunk of 8 f32 is two copies of 16 bytes.
  hooks.copyChunk = [&](Value dstMem, ValueRange dstAt, Value src,
                        ValueRange srcAt, Value count) {
    Type dt = cast<MemRefType>(dstMem.getType()).getElementType();
    UnitAttr bypassL1 = isa<Float8E4M3FNType, Float8E5M2Type>(dt)
                            ? UnitAttr()
                            : b.getUnitAttr();
    auto tokenType = nvgpu::DeviceAsyncTokenType::get(b.getContext());
    if (!dt.isF32())
      return (void)nvgpu::DeviceAsyncCopyOp::create(
          b, tokenType, dstMem, dstAt, src, srcAt, b.getIndexAttr(8), count,
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
  if (chip.fp8) {
    // Pairs through the hardware conversion (exact: every fp8 value is an
    // f16).
    hooks.decodeFp8 = [&](Value raw) {
      Type srcElem = cast<VectorType>(raw.getType()).getElementType();
      Value pairs = vector::BitCastOp::create(
          b, VectorType::get({4}, b.getI16Type()), raw);
      std::string cvt = isa<Float8E4M3FNType>(srcElem)
                            ? "cvt.rn.f16x2.e4m3x2 $0, $1;"
                            : "cvt.rn.f16x2.e5m2x2 $0, $1;";
      SmallVector<Value> decoded;
      for (int64_t j = 0; j < 4; ++j) {
        Value h2 = inlinePtx(b, b.getI32Type(),
                             ValueRange{vector::ExtractOp::create(b, pairs, j)},
                             cvt, "=r,h",
                             /*sideEffects=*/false);
        Value halves = vector::BitCastOp::create(
            b, VectorType::get({2}, b.getF16Type()),
            vector::FromElementsOp::create(
                b, VectorType::get({1}, b.getI32Type()), ValueRange{h2}));
        for (int64_t i = 0; i < 2; ++i)
          decoded.push_back(arith::ExtFOp::create(
              b, b.getF32Type(),
              Value(vector::ExtractOp::create(b, halves, i))));
      }
      return decoded;
    };
  }
  // The gathering producer's staging is copies only; fp8 chunks go out
  // without a branch each.
  hooks.partialCopies = producerStaging;
  hooks.rowsFirst = rowsFirstStaging;
  hooks.selectRows = true;
  TileStager(e, tid, threads, shape.headDim, ct, std::move(hooks))
      .stage(
          dst.mem, [&](Value r, Value x0) { return tileAt(dst, r, x0); },
          numRows, rowElems, source);
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

WarpAttentionBuilder::KvBuffers WarpAttentionBuilder::kvBuffers(Value stage) {
  Value base =
      e.add(e.idx(g.mRows * g.stride), e.mul(stage, e.idx(g.kvElems())));
  Value vBase = e.add(base, e.idx(g.bn * g.stride));
  return {tile(base, g.bn, g.dPad, g.stride),
          tile(vBase, g.bn, g.dPad, g.stride),
          tile(vBase, g.dPad, g.bn, g.vtStride)};
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
  // The gathering producer stages a paged row's chunks in one thread: one
  // block-table read per key (its 128 threads, a tile of 128 keys), and
  // vLLM's split-x K cache holds a chunk of 16 consecutive keys' rows
  // contiguously.
  rowsFirstStaging = producerStaging && walk.paged && g.bn == threads;
  stage(raw ? bytesOf(dst, kType) : dst, g.bn, g.dPad,
        [&](Value r) { return tile.key(r, isK, /*scaled=*/!raw); });
  rowsFirstStaging = false;
}

void WarpAttentionBuilder::stageValuesTransposed(const KvWalk &walk,
                                                 const SharedTile &dst,
                                                 Value n0, Value nValid) {
  KvTileRows tile(e, walk, n0, nValid, shape.headDim);
  stage(dst, g.dPad, g.bn, [&](Value d) { return tile.valueColumn(d); });
}

} // namespace mlir::attn::warp

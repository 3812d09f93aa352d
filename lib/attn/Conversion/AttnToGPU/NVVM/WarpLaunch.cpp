//===- WarpLaunch.cpp - launching warp programs -----------------*- C++ -*-===//
//
// The launch side of the NVIDIA programs (WarpProgram.h): each kernel's
// block size and shared-memory footprint (with the small-grid footprint
// of compact fp8 decode programs), the tensor maps its TMA copies need,
// and the shape queries the lowering asks before it emits a program.
//
//===----------------------------------------------------------------------===//

#include "WarpProgram.h"
#include "attn/Conversion/AttnToGPU/Targets.h"
#include "attn/IR/AttnOps.h"
#include "attn/Transforms/Schedule.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::warp;

KernelLaunch mlir::attn::warpLaunchFor(Operation *op, const TileShape &shape,
                                       Type ct, NvidiaChip chip) {
  Geometry g = geometryOf(shape, chip.wgmma, ct.getIntOrFloatBitWidth() / 8);
  int64_t ctBytes = ct.getIntOrFloatBitWidth() / 8;
  // fp8 wgmma programs: tiles of fp8 bytes, and a V^T a buffer past the
  // ring.
  bool fp8Wgmma =
      shape.tma && shape.producerWarps && g.wgmma && multipliesFp8OnWgmma(op);
  if (fp8Wgmma)
    g = fp8WgmmaGeometry(g, ctBytes);
  // (A producer warpgroup only where its TMA copies can be made, see
  // warpTensorMaps, or it gathers, see warpGathersKeys: the convert pass
  // rejects the schedule otherwise.)
  int64_t warps = g.warps + shape.producerWarps;
  int64_t elems = saturatingAdd(saturatingMul(g.mRows, g.stride),
                                saturatingMul(g.stages, g.kvElems()));
  int64_t bytes = saturatingMul(elems, ct.getIntOrFloatBitWidth() / 8);
  // A gathering producer of fp8 caches stages their bytes first: two slots
  // of K and V^T at one byte an element (WarpSpecialized.cpp).
  if (shape.producerWarps && gathersFp8Caches(op) &&
      (!shape.tma || isa<UnifiedOp>(op)))
    bytes = saturatingAdd(bytes, saturatingMul(4, g.bn * g.dPad));
  // Decode-shaped fp8 programs: their raw K (rows padded) and V ring
  // (walkRawFp8).
  bool rawFp8Keys = rawStagedFp8Keys(op, shape, ct, chip);
  if (rawFp8Keys)
    bytes = saturatingAdd(bytes, rawRingBytes(g));
  // (Unified's raw-staged programs fold the cache scales, so QK reads K
  // raw wherever the head allows: readsRawFp8KeysDirect, which the
  // builder's layout takes from the launch.) Their
  // V takes the K tile's place: three blocks an SM instead of two for
  // heads of 128. On H200 (GQA 32/8 D=128 e4m3 decode rows,
  // bench/results/2026-11-30-h200-session24.md) that ran 1.06-1.21x
  // faster from 576 programs up, but 8-20% slower at 264 and 512, where
  // three an SM leave SMs idle or a short last wave: such grids launch
  // with the two-an-SM footprint.
  int64_t keyTileBytes = 0;
  bool rawKeysDirect = readsRawFp8KeysDirect(op, shape, ct, chip);
  if (rawKeysDirect) {
    keyTileBytes = g.bn * g.stride * ctBytes; // (raw programs: one stage)
    bytes -= keyTileBytes;
  }
  if (fp8Wgmma)
    bytes = saturatingAdd(bytes, g.stages * transposedValueBytes(g));
  if (int64_t merge = keySplitScratchBytes(g))
    bytes = std::max(bytes, saturatingAdd(g.mRows * g.stride * ctBytes, merge));
  if (g.wgmma)
    bytes = saturatingAdd(bytes, kAlignSlack);
  // (Persistence carries the producer's ring from program to program.)
  bool persistent = shape.persistent && shape.tma && shape.producerWarps > 0;
  // Causal programs differ in length: claiming the longest first across
  // every head group (tile-major) ran 2-4% faster at 1024-8192 keys than
  // head group by head group (bench/results/2026-11-30-h200-session23.md).
  auto flash = dyn_cast<FlashOp>(op);
  bool tileMajor = persistent && flash && flash.getCausal();
  KernelLaunch launch{saturatingMul(warps, kLanes),
                      bytes,
                      persistent,
                      tileMajor,
                      rawFp8Keys,
                      rawKeysDirect};
  if (keyTileBytes) {
    launch.smallGridProgramsPerSM = kCompactFromProgramsPerSM;
    launch.smallGridSharedBytes = bytes + keyTileBytes;
  }
  // Split-KV unified programs that stream short segments of pages (the
  // kStreamPagesHint: each page read once, by one program) give their
  // copies an L2 evict-first policy, so that the lines they bring do not
  // push out the lines other kernels left in L2 (a dirty one costs a
  // write-back). On H200 (GQA 32/8, D=128, pages of 16, bench/results/
  // 2026-12-01-h200-decode-evict-first.log) that took a fixed 2-3 us off a
  // launch and cost about 3% of the streaming: bf16 B=1 ctx 32k (1024 keys
  // a program) ran 1.06x faster, e4m3 1.07x; programs of 4096 keys and
  // more lost up to 3%, unsplit batches (B=64, 256) 2-4%. The drop-in
  // sets the hint for programs of at most 2048 keys.
  auto unified = dyn_cast<UnifiedOp>(op);
  launch.streamingCopies = unified && unified.isSplitKv() &&
                           op->hasAttr(kStreamPagesHint) && chip.wgmma &&
                           !shape.producerWarps;
  return launch;
}

SmallVector<TensorMapRequest> mlir::attn::warpTensorMaps(Operation *op,
                                                         const TileShape &shape,
                                                         Type ct,
                                                         NvidiaChip chip) {
  // Dense K and V of attn.flash and attn.blocksparse, stored in the
  // compute type, on warpgroup programs of double-buffered tiles whose
  // 64-column swizzle atoms the head dim fills: TMA writes exactly the
  // tiles the wgmma descriptors read. (attn-plan asks for them in the
  // schedule: tmaOperands in Plan.cpp.)
  OpOperand *qOperand, *kOperand, *vOperand;
  Value qScale;
  // Prefix prefill on the gathering producer warpgroup: its caches are no
  // TMA boxes, but Q and the new tokens' K and V (dense, stored like the
  // tiles) are; one elected thread loads them as flash's producer does, so
  // the producer's threads only gather the cache pages.
  if (auto prefix = dyn_cast<PrefixPrefillOp>(op)) {
    if (!warpGathersKeys(op, shape, ct, chip) ||
        shape.headDim % wgmma::kAtomCols || shape.blockQ > 256 ||
        shape.pack > 256)
      return {};
    auto dense = [&](Value x) {
      auto type = cast<MemRefType>(x.getType());
      SmallVector<int64_t> strides;
      int64_t offset;
      return type.getElementType() == ct && type.getRank() == 3 &&
             succeeded(type.getStridesAndOffset(strides, offset)) &&
             strides[2] == 1;
    };
    if (!dense(prefix.getQ()) || !dense(prefix.getK()) || !dense(prefix.getV()))
      return {};
    int64_t atomCols = wgmma::kAtomRowBytes / (ct.getIntOrFloatBitWidth() / 8);
    Geometry g = geometryOf(shape, chip.wgmma, ct.getIntOrFloatBitWidth() / 8);
    return {{prefix.getQMutable().getOperandNumber(),
             {shape.blockQ, shape.pack, atomCols}},
            {prefix.getKMutable().getOperandNumber(), {g.bn, 1, atomCols}},
            {prefix.getVMutable().getOperandNumber(), {g.bn, 1, atomCols}}};
  }
  // Unified prefill rows on the same producer: Q (dense, stored like the
  // tiles) is loaded by TMA; with tma, so are the NHD pages of whole tiles
  // (boxes [1, page rows, 1, 64] addressed through the block table),
  // otherwise their rows are gathered.
  if (auto unified = dyn_cast<UnifiedOp>(op)) {
    auto qType = cast<MemRefType>(unified.getQ().getType());
    SmallVector<int64_t> strides;
    int64_t offset;
    if (!warpGathersKeys(op, shape, ct, chip) ||
        shape.headDim % wgmma::kAtomCols || shape.blockQ > 256 ||
        shape.pack > 256 || qType.getElementType() != ct ||
        failed(qType.getStridesAndOffset(strides, offset)) || strides[2] != 1)
      return {};
    int64_t atomCols = wgmma::kAtomRowBytes / (ct.getIntOrFloatBitWidth() / 8);
    SmallVector<TensorMapRequest> requests = {
        {unified.getQMutable().getOperandNumber(),
         {shape.blockQ, shape.pack, atomCols}}};
    // (fp8 caches: raw pages, one 128-byte atom of a head of 128 a row,
    // for the raw ring: rawPagesByTma.)
    bool fp8 = gathersFp8Caches(op);
    if (shape.tma && (!fp8 || shape.headDim == wgmma::kAtomRowBytes)) {
      Geometry g =
          geometryOf(shape, chip.wgmma, ct.getIntOrFloatBitWidth() / 8);
      int64_t rows = pageBoxRows(unified.getBlockSize(), g.bn);
      int64_t cols = fp8 ? wgmma::kAtomRowBytes : atomCols;
      for (OpOperand *cache :
           {&unified.getKCacheMutable(), &unified.getVCacheMutable()})
        requests.push_back({cache->getOperandNumber(), {1, rows, 1, cols}});
    }
    return requests;
  }
  if (auto flash = dyn_cast<FlashOp>(op)) {
    if (flash.getQuantizeTo())
      return {};
    qOperand = &flash.getQMutable();
    kOperand = &flash.getKMutable();
    vOperand = &flash.getVMutable();
    qScale = flash.getQScale();
  } else if (auto sparse = dyn_cast<BlockSparseOp>(op)) {
    qOperand = &sparse.getQMutable();
    kOperand = &sparse.getKMutable();
    vOperand = &sparse.getVMutable();
  } else {
    return {};
  }
  if (!shape.tma || !chip.wgmma || ct.isF32() ||
      shape.headDim % wgmma::kAtomCols)
    return {};
  Geometry g = geometryOf(shape, chip.wgmma, ct.getIntOrFloatBitWidth() / 8);
  if (!g.wgmma || g.stages != 2 || g.bn > 256)
    return {};
  // A producer warpgroup splits the registers with one, two or three
  // consumer warpgroups (WarpSpecialized.cpp, registerSplit); three only
  // in flash programs (block-sparse ones are untested there).
  if (shape.producerWarps && g.warps != 4 && g.warps != 8 &&
      (g.warps != 12 || !isa<FlashOp>(op)))
    return {};
  // fp8 Q, K and V multiply as stored on fp8 wgmma (WarpFp8Wgmma.cpp):
  // boxes of 128 fp8 (one 128-byte atom; a head of 64 reads zeros past
  // its 64), Q with its scale too, on the producer warpgroup that
  // transposes V (two consumer warpgroups, or three for heads of 64;
  // 128-key tiles: its lanes' layout).
  bool fp8 = multipliesFp8OnWgmma(op);
  if (fp8 &&
      (shape.producerWarps != kProducerWarps || shape.persistent ||
       (g.warps != 8 && (g.warps != 12 || g.dPad != 64)) || !fp8WgmmaKeys(g) ||
       (g.dPad != 64 && g.dPad != 128 && g.dPad != 256)))
    return {};
  int64_t atomCols = wgmma::kAtomRowBytes / (fp8 ? 1 : 2);
  // Programs that pair blocks (two layout rows, or a pipeline's one-row
  // programs: warpPairsBlocks) load each tile as two blocks (boxes of a
  // block's rows); other walks whole tiles.
  int64_t boxRows = g.bn;
  if (auto sparse = dyn_cast<BlockSparseOp>(op);
      sparse && (shape.blockQ > sparse.getQueryBlockSize() ||
                 warpPairsBlocks(op, shape, chip)))
    boxRows = sparse.getBlockSizeAttr().getInt();
  SmallVector<TensorMapRequest> requests;
  for (OpOperand *operand : {kOperand, vOperand}) {
    auto type = cast<MemRefType>(operand->get().getType());
    SmallVector<int64_t> strides;
    int64_t offset;
    if ((fp8 ? !isFp8(type.getElementType()) : type.getElementType() != ct) ||
        type.getRank() != 3 ||
        failed(type.getStridesAndOffset(strides, offset)) || strides[2] != 1)
      return {};
    requests.push_back({operand->getOperandNumber(), {boxRows, 1, atomCols}});
  }
  // The producer warpgroup also loads Q as stored (no q scale, unless fp8
  // wgmma scales the dot products): boxes of [block_q, heads_per_program,
  // atom columns], whose rows (token-major, heads packed) are the M tile's.
  auto qType = cast<MemRefType>(qOperand->get().getType());
  SmallVector<int64_t> qStrides;
  int64_t qOffset;
  if (shape.producerWarps && (!qScale || fp8) &&
      (fp8 || qType.getElementType() == ct) &&
      succeeded(qType.getStridesAndOffset(qStrides, qOffset)) &&
      qStrides[2] == 1 && shape.blockQ <= 256 && shape.pack <= 256)
    requests.push_back(
        {qOperand->getOperandNumber(), {shape.blockQ, shape.pack, atomCols}});
  // (fp8 wgmma reads Q only as stored: no program without its map.)
  else if (fp8)
    return {};
  return requests;
}

bool mlir::attn::warpGathersKeys(Operation *op, const TileShape &shape, Type ct,
                                 NvidiaChip chip) {
  // (WarpAttentionBuilder::setUpGather then gathers: its tiles are whole
  // swizzle atoms, double-buffered, of heads of 64 or 128 (the register
  // split is sized for those), staged by 16-byte copies; with tma, only
  // unified's NHD pages that are whole boxes, see produceLoaded.)
  if (!shape.producerWarps || shape.persistent || !chip.wgmma || ct.isF32() ||
      !gathersCaches(op) || shape.headDim > 128)
    return false;
  Geometry g = geometryOf(shape, chip.wgmma, ct.getIntOrFloatBitWidth() / 8);
  auto unified = dyn_cast<UnifiedOp>(op);
  if (shape.tma && (!unified || !pageBoxRows(unified.getBlockSize(), g.bn)))
    return false;
  return g.wgmma && g.stages == 2 && (g.warps == 4 || g.warps == 8) &&
         g.dPad == shape.headDim && g.bn <= 256;
}

bool mlir::attn::warpPairsBlocks(Operation *op, const TileShape &shape,
                                 NvidiaChip chip) {
  auto sparse = dyn_cast<BlockSparseOp>(op);
  return sparse && chip.wgmma && sparse.getBlockSizeAttr().getInt() == 64 &&
         shape.blockN == 128 && shape.rows() == 2 * wgmma::kRows &&
         shape.warps == 8 && shape.tma &&
         shape.producerWarps == kProducerWarps && shape.pingpong &&
         !shape.persistent;
}

bool mlir::attn::warpWalksLayoutRowPairs(Operation *op, const TileShape &shape,
                                         Type ct, NvidiaChip chip) {
  auto sparse = dyn_cast<BlockSparseOp>(op);
  if (!sparse || sparse.getQueryBlockSize() != wgmma::kRows ||
      shape.blockQ != 2 * wgmma::kRows || shape.pack != 1 ||
      !warpPairsBlocks(op, shape, chip))
    return false;
  Geometry g = geometryOf(shape, chip.wgmma, ct.getIntOrFloatBitWidth() / 8);
  return g.wgmma && g.warps == 8 && g.stages == 2 &&
         !warpTensorMaps(op, shape, ct, chip).empty();
}

ProgramBody mlir::attn::warpBodyOf(const TileShape &shape, NvidiaChip chip) {
  // (The body does not depend on the element size.)
  Geometry g = geometryOf(shape, chip.wgmma, 2);
  // Each 16x8 accumulator tile of mma.sync (and of wgmma, per warp) holds 4
  // elements per lane: S has nTiles of them per fragment, O dTiles.
  int64_t tiles = saturatingAdd(g.nTiles(), g.dTiles());
  return {g.warpRows(), saturatingMul(saturatingMul(g.mFrags, tiles), 4)};
}

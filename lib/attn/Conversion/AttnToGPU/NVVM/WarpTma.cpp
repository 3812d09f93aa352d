//===- WarpTma.cpp - K/V tiles by the bulk tensor copy engine -------------===//
//
// sm_90a warpgroup programs of dense walks (attn.flash) load K and V with
// cp.async.bulk.tensor (nvgpu.tma.async.load) instead of per-thread
// cp.async: one thread issues a tile's boxes, [bn, 1, 64] elements each
// (one 64-column swizzle atom of [bn] rows; TMA's 128-byte swizzle writes
// the layout the wgmma descriptors read), and the copy engine completes
// them on the buffer's `full` mbarrier. Every thread arrives on the
// buffer's `empty` mbarrier when its warpgroup's MMAs are done with it,
// and the issuing thread waits for that before refilling the buffer. No
// block barrier remains in the walk, so each warpgroup runs at its own
// pace, up to a tile ahead of the other.
//
//===----------------------------------------------------------------------===//

#include "WarpProgram.h"
#include "attn/IR/AttnOps.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::warp;

namespace mlir::attn::warp {

namespace {
/// The mbarriers of the double buffer: full[s] at s, empty[s] at 2 + s;
/// warp-specialized programs keep K and V apart (fullK .. emptyV), and
/// add Q's (kQueryBarrier), and persistent ones the consumers' release of
/// Q (kQueryFreeBarrier) and the hand-over of claimed programs.
constexpr int64_t kBarriers = 4, kSpecializedBarriers = 9,
                  kPersistentBarriers = 14, kTransposingBarriers = 12;
} // namespace

bool WarpAttentionBuilder::setUpTma(const ProgramRows &rows,
                                    ArrayRef<KvWalk> walks) {
  // (Walks of several ranges only with a producer, whose ring runs on
  // across them.)
  if (maps.empty() || !g.wgmma || g.stages != 2 || walks.size() != 1 ||
      !walks[0].denseK ||
      ((walks[0].forEachRange || walks[0].forEachBlockTile) &&
       !shape.producerWarps))
    return false;
  const TensorMapArg *kArg = nullptr, *vArg = nullptr, *qArg = nullptr;
  for (const TensorMapArg &m : maps) {
    if (m.operand == walks[0].denseK)
      kArg = &m;
    if (m.operand == walks[0].denseV)
      vArg = &m;
    if (m.operand == q)
      qArg = &m;
  }
  if (!kArg || !vArg)
    return false;
  // fp8 Q, K and V (warpTensorMaps maps them only for fp8 wgmma).
  qgmma = isFp8(cast<MemRefType>(kArg->operand.getType()).getElementType());
  if (qgmma) {
    kType = walks[0].keyType;
    vType = cast<MemRefType>(vArg->operand.getType()).getElementType();
    // The consumers load them again after setmaxnreg (loadFp8Scales).
    qScaleAtEntry = rows.qScale;
    kScaleAtEntry = walks[0].keyScale;
    vScaleAtEntry = walks[0].locate(e, walks[0].lo).vScale;
  }
  kMap = tensorMapDescriptor(b, *kArg);
  vMap = tensorMapDescriptor(b, *vArg);
  ws = shape.producerWarps > 0;
  // (One buffer a kernel: a persistent kernel's producer and consumers
  // each set up its program, and share the entries. 16-byte aligned:
  // LLVM stores an entry's words as vectors.)
  if (walks[0].forEachBlockTile) {
    auto func = cast<gpu::GPUFuncOp>(entry->getParentOp());
    if (!func.getNumWorkgroupAttributions()) {
      func.addWorkgroupAttribution(
          MemRefType::get({2 * kUnionWords}, b.getI32Type(),
                          MemRefLayoutAttrInterface(),
                          gpu::AddressSpaceAttr::get(
                              b.getContext(), gpu::AddressSpace::Workgroup)),
          b.getLoc());
      func.setWorkgroupAttributionAttr(0, LLVM::LLVMDialect::getAlignAttrName(),
                                       b.getI64IntegerAttr(16));
    }
    unionTiles = func.getWorkgroupAttributions().front();
  }
  ranged = bool(walks[0].forEachRange);
  // (fp8 wgmma: the q scale applies to the dot products.)
  if (ws && qArg && (!rows.qScale || qgmma) && !rows.qQuantize)
    qMap = tensorMapDescriptor(b, *qArg);
  pingpong = ws && pingpongApplies();
  if (persistent) {
    // Initialized once per block, before the roles' loops.
    bars = persistent->barriers;
    return true;
  }
  bars = createRingBarriers(b, e, tid, ws ? consumerThreads() : threads, ws,
                            /*persistent=*/false, /*fillers=*/1,
                            /*rawValues=*/qgmma);
  return true;
}

Value tensorMapDescriptor(ImplicitLocOpBuilder &b, const TensorMapArg &m) {
  MLIRContext *ctx = b.getContext();
  auto space = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  Type elem = cast<MemRefType>(m.operand.getType()).getElementType();
  auto type = nvgpu::TensorMapDescriptorType::get(
      ctx, MemRefType::get(m.box, elem, MemRefLayoutAttrInterface(), space),
      nvgpu::TensorMapSwizzleKind::SWIZZLE_128B,
      nvgpu::TensorMapL2PromoKind::L2PROMO_256B,
      nvgpu::TensorMapOOBKind::OOB_ZERO,
      nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
  // The parameters are pointers to the maps; the nvgpu ops read them as
  // descriptors (the same !llvm.ptr once lowered).
  return UnrealizedConversionCastOp::create(b, type, m.map).getResult(0);
}

Value createRingBarriers(ImplicitLocOpBuilder &b, LoopEmitter &e, Value tid,
                         int64_t consumers, bool specialized, bool persistent,
                         int64_t fillers, bool rawValues,
                         int64_t queryFillers) {
  MLIRContext *ctx = b.getContext();
  auto space = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  int64_t count = !specialized ? kBarriers
                  : rawValues  ? kTransposingBarriers
                  : persistent ? kPersistentBarriers
                               : kSpecializedBarriers;
  Value bars = nvgpu::MBarrierCreateOp::create(
      b, nvgpu::MBarrierGroupType::get(ctx, space, count));
  e.ifThen(e.eq(tid, e.idx(0)), [&] {
    // full: the copy engine's bytes (one arrival, the expect_tx) or the
    // gathering threads' copies; empty: every computing thread.
    int64_t fulls = specialized ? 4 : 2;
    for (int64_t s = 0; s < fulls; ++s) {
      nvgpu::MBarrierInitOp::create(b, bars, e.idx(fillers), e.idx(s), Value());
      nvgpu::MBarrierInitOp::create(b, bars, e.idx(consumers), e.idx(fulls + s),
                                    Value());
    }
    if (specialized)
      nvgpu::MBarrierInitOp::create(
          b, bars, e.idx(queryFillers ? queryFillers : fillers),
          e.idx(kQueryBarrier), Value());
    if (persistent) {
      nvgpu::MBarrierInitOp::create(b, bars, e.idx(consumers),
                                    e.idx(kQueryFreeBarrier), Value());
      for (int64_t s = 0; s < 2; ++s) {
        nvgpu::MBarrierInitOp::create(b, bars, e.idx(1),
                                      e.idx(kClaimFullBarrier + s), Value());
        nvgpu::MBarrierInitOp::create(
            b, bars, e.idx(consumers + kProducerWarps * kLanes),
            e.idx(kClaimEmptyBarrier + s), Value());
      }
    }
    // (Raw V: the copy engine's bytes, one expect_tx.)
    for (int64_t s = 0; rawValues && s < 2; ++s)
      nvgpu::MBarrierInitOp::create(b, bars, e.idx(1),
                                    e.idx(kRawValueBarrier + s), Value());
    // Make the initialized barriers visible to the copy engine (the async
    // proxy) before any copy can complete on them.
    NVVM::FenceMbarrierInitOp::create(b);
  });
  wgmma::fenceProxyAsync(b);
  gpu::BarrierOp::create(b);
  return bars;
}

void WarpAttentionBuilder::waitBarrier(Value index, Value parity) {
  nvgpu::MBarrierTryWaitParityOp::create(
      b, bars, e.notI(e.eq(parity, e.idx(0))), e.idx(kWaitTicks), index);
}

void WarpAttentionBuilder::issueTmaTile(const KvWalk &walk, Value stage,
                                        Value n0) {
  nvgpu::MBarrierArriveExpectTxOp::create(b, bars, e.idx(2 * tileBytes(g.bn)),
                                          stage, Value());
  KvBuffers buf = kvBuffers(stage);
  issueTmaBoxes(walk, buf.k, kMap, stage, n0);
  issueTmaBoxes(walk, buf.v, vMap, stage, n0);
}

void WarpAttentionBuilder::issueTmaBoxes(const KvWalk &walk,
                                         const SharedTile &tile, Value map,
                                         Value barrier, Value n0,
                                         int64_t firstRow) {
  // Atoms of 128 bytes a row: 64 columns of the compute type, 128 of fp8
  // (qgmma), bn rows each.
  int64_t atomCols = wgmma::kAtomRowBytes / operandBytes();
  int64_t atoms = tmaAtoms();
  Value row = e.add(walk.denseBase, n0);
  // (The map's box: [bn or a block's rows, 1, atomCols] of the operand's
  // type; see warpTensorMaps.)
  MemRefType boxType =
      cast<nvgpu::TensorMapDescriptorType>(map.getType()).getTensor();
  for (int64_t a = 0; a < atoms; ++a) {
    // Atom a of the tile, 1024-byte aligned (alignPad: see setUp).
    Value bytes =
        e.add(alignPad,
              e.add(e.mul(tile.offset, e.idx(ct.getIntOrFloatBitWidth() / 8)),
                    e.idx((a * g.bn + firstRow) * wgmma::kAtomRowBytes)));
    Value dst = memref::ViewOp::create(b, boxType, shared, bytes, ValueRange{});
    // Coordinates innermost first: head dim, KV head, token.
    nvgpu::TmaAsyncLoadOp::create(
        b, dst, bars, map, ValueRange{e.idx(a * atomCols), walk.denseHead, row},
        barrier, Value(), Value());
  }
}

void WarpAttentionBuilder::issuePageBoxes(const KvWalk &walk,
                                          const SharedTile &tile, Value map,
                                          Value barrier, Value n0, bool isK,
                                          bool rawBytes) {
  // Box p of the tile is keys [n0 + p rows, n0 + (p + 1) rows): one page
  // (or a bn-row part of one), located once through the block table; its
  // atoms land at rows p rows .. of each of the tile's atoms (the 128-byte
  // swizzle follows the address, so rows of a box continue the tile's).
  int64_t elemBytes = rawBytes ? 1 : operandBytes();
  int64_t atomCols = wgmma::kAtomRowBytes / elemBytes;
  int64_t atoms = llvm::divideCeil(g.dPad * elemBytes, wgmma::kAtomRowBytes);
  MemRefType boxType =
      cast<nvgpu::TensorMapDescriptorType>(map.getType()).getTensor();
  for (int64_t p = 0; p < g.bn / pageBoxRows; ++p) {
    KeyRow row = walk.locate(e, e.add(n0, e.idx(p * pageBoxRows)));
    for (int64_t a = 0; a < atoms; ++a) {
      SmallVector<Value> at =
          isK ? row.kAt(e.idx(a * atomCols)) : row.vAt(e.idx(a * atomCols));
      Value bytes = e.add(
          alignPad,
          e.add(e.mul(tile.offset, e.idx(ct.getIntOrFloatBitWidth() / 8)),
                e.idx((a * g.bn + p * pageBoxRows) * wgmma::kAtomRowBytes)));
      Value dst =
          memref::ViewOp::create(b, boxType, shared, bytes, ValueRange{});
      // Coordinates innermost first: d, KV head, slot, block.
      nvgpu::TmaAsyncLoadOp::create(b, dst, bars, map,
                                    SmallVector<Value>(llvm::reverse(at)),
                                    barrier, Value(), Value());
    }
  }
}

void WarpAttentionBuilder::walkTma(const ProgramRows &rows, const KvWalk &walk,
                                   Value lo, Value hi, Value active) {
  // Tile t (from lo) computes from buffer t % 2, whose full barrier is then
  // in phase (t / 2) % 2. (One range per program, so t counts from 0.)
  Value bn = e.idx(g.bn);
  Value leader = e.eq(tid, e.idx(0));
  e.ifThen(e.andI(leader, e.lt(lo, hi)),
           [&] { issueTmaTile(walk, e.idx(0), lo); });
  KvBuffers first = cur;
  e.forLoop(lo, hi, bn, [&](Value n0) {
    pinLaneCoordinates();
    Value t = e.divU(e.sub(n0, lo), bn);
    Value stage = e.remU(t, e.idx(2));
    Value next = e.add(n0, bn);
    // Tile t + 1 goes into the other buffer once every thread is done with
    // tile t - 1 there.
    e.ifThen(e.andI(leader, e.lt(next, hi)), [&] {
      Value other = e.sub(e.idx(1), stage);
      e.ifThen(e.le(e.idx(1), t), [&] {
        Value previous = e.sub(t, e.idx(1));
        waitBarrier(e.add(e.idx(2), other),
                    e.remU(e.divU(previous, e.idx(2)), e.idx(2)));
      });
      issueTmaTile(walk, other, next);
    });
    waitBarrier(stage, e.remU(e.divU(t, e.idx(2)), e.idx(2)));
    cur = kvBuffers(stage);
    computeTile(rows, walk, active, n0, e.min(bn, e.sub(hi, n0)));
    cur = first;
    // (computeTile has waited for its MMAs: the buffer is free.)
    nvgpu::MBarrierArriveOp::create(b, bars, e.add(e.idx(2), stage));
    unpinLaneCoordinates();
  });
}

} // namespace mlir::attn::warp

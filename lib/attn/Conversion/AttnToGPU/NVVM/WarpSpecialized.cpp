//===- WarpSpecialized.cpp - producer/consumer warpgroups (sm_90a) --------===//
//
// The Hopper pipeline of dense walks (schedule producer_warps = 4), after
// FlashAttention-3:
//
// * A producer warpgroup (warps g.warps ..) gives its registers away
//   (setmaxnreg.dec) and one of its threads issues every K and V tile by
//   TMA into the double buffer, each on its own `full` mbarrier, refilling
//   a buffer once the consumers have arrived on its `empty` one. K and V
//   are released separately: K(t + 2) loads as soon as QK(t) is done.
// * The consumer warpgroups take the registers (setmaxnreg.inc) and run
//   step t as: issue QK(t), rescale O and issue PV(t - 1) (P of the
//   previous step, kept in registers), wait for QK(t), the softmax of tile
//   t under PV(t - 1), wait for PV(t - 1), then pack P(t) (not before: the
//   packed registers of P(t - 1) are PV(t - 1)'s operand). Between an MMA
//   group's issue and its wait the code is straight-line (ptxas serializes
//   wgmma whose registers are in flight across a branch: C7518), so the masked
//   and mask-free steps are whole copies, and O is rescaled on every step.
// * Pingpong: the two (or three) consumer warpgroups issue their MMAs in
//   turn, each waiting on a named barrier that the previous one arrives on
//   once it has issued its own, so that one's softmax runs under the
//   others' MMAs.
// * Walks of several ranges (block-sparse CSR blocks): the producer walks
//   the ranges too, and the ring and the consumers' pipeline run on from
//   range to range (walkSpecializedRange, finishWalks). Programs of one
//   consumer warpgroup (64 rows) launch at 128 registers, two per SM.
// * Union walks (block-sparse blocks paired into 128-key tiles):
//   WarpUnion.cpp. Persistent grids (claimed programs): WarpPersistent.cpp.
// * Gathering producers (schedule producer_warps without tma; prefix
//   prefill over paged caches, whose tiles are no TMA box): all producer
//   threads copy Q and each K/V tile with cp.async, the tile's full
//   barrier tracking the copies (noinc arrivals counting the threads);
//   the walks (cache, then new tokens) share one ring, the PV pending
//   across them taking the V layout of its own walk (pendingStep).
//
//===----------------------------------------------------------------------===//

#include "WarpProgram.h"
#include "attn/IR/AttnOps.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::warp;

namespace mlir::attn::warp {

namespace {
/// Registers per thread at launch and after the split.
struct RegisterSplit {
  int32_t entry, producer, consumer;
};
/// Whether `s` fits the registers the launch gives a block of
/// `consumerWarps` plus the producer warpgroup: setmaxnreg.inc waits until
/// the block has them, so a split that asks for more never starts its
/// consumers (a hang, not a compile error).
constexpr bool fitsBlock(RegisterSplit s, int64_t consumerWarps) {
  return kProducerWarps * s.producer + consumerWarps * s.consumer <=
         (kProducerWarps + consumerWarps) * s.entry;
}

constexpr RegisterSplit registerSplit(int64_t consumerWarps, bool persistent,
                                      bool gather) {
  // Three consumer warpgroups (192-row programs; no gathering producer
  // has them, a transposing one transposes one round at a time): 512
  // threads get 128 each at launch, the consumers 160 (as
  // FlashAttention-3's three MMA warpgroups).
  if (consumerWarps == 12)
    return persistent ? RegisterSplit{128, 32, 160}
                      : RegisterSplit{128, 24, 160};
  // A gathering producer addresses the 16 + 16 copies of a cache tile
  // (Q and the new tokens' tiles come by TMA): 56 registers (at 40 a head
  // of 128 spilled 250 bytes; before those TMA loads, addressing the new
  // tokens' rows spilled at 56 in programs of one head and through run-time
  // strides), and the consumers of heads of 128 spill nothing at 224 (at
  // 216 vLLM's grid case of 64 query heads a KV head with a window spilled
  // 92 bytes).
  if (gather)
    return consumerWarps == 4 ? RegisterSplit{128, 56, 200}
                              : RegisterSplit{168, 56, 224};
  // One consumer warpgroup (block-sparse programs of 64 rows): two blocks
  // of 256 threads share an SM, 128 registers each at launch (the
  // persistent producer's loop takes 32, as below).
  if (consumerWarps == 4)
    return persistent ? RegisterSplit{128, 32, 224}
                      : RegisterSplit{128, 24, 232};
  // Two: 128 * 24 + 256 * 240 fit the 64K of an SM (the launch gives each
  // of the 384 threads 168). So does a producer that transposes V (fp8
  // wgmma): with ldmatrix/stmatrix it needs no more, and the consumers of
  // heads of 256 need the 240 (at 224 and 232 they spilled 108-312 bytes);
  // heads of 128 ran 2-5% faster at 24/240 than at 56/224, where an older
  // transpose kept four rounds of words in flight (bench/results/
  // 2026-11-28-h100-fp8-matrix-transpose.md). Persistent kernels: the
  // producer's loop over the programs needs more (ptxas spilled 8-12 bytes at
  // 24 in the non-causal ones; the consumers spill nothing at 232).
  return persistent ? RegisterSplit{168, 32, 232} : RegisterSplit{168, 24, 240};
}
/// Every split of one, two or three consumer warpgroups fits its block.
constexpr bool everySplitFits() {
  for (int64_t warps : {4, 8, 12})
    for (int flags = 0; flags < 4; ++flags)
      if (!fitsBlock(registerSplit(warps, flags & 1, flags & 2), warps))
        return false;
  return true;
}
static_assert(everySplitFits(), "a register split exceeds its block");
/// Named barriers of the pingpong: warpgroup w of n (two or three) waits
/// on kTurnBarrier + w, which warpgroup w - 1 (mod n) arrives at (barrier
/// 0 is the block's); the waiting and the arriving warpgroup's threads
/// count.
constexpr int32_t kTurnBarrier = 1, kTurnThreads = 2 * 128;
/// The consumer warpgroups' own barrier (Q staged).
constexpr int32_t kConsumerBarrier = 4;
/// The producer warpgroup's own barrier (its raw ring).
constexpr int32_t kProducerBarrier = 5;
} // namespace

Value newCounter(LoopEmitter &e, Block *entry) {
  ImplicitLocOpBuilder &b = e.builder();
  Type i32 = b.getI32Type();
  Value c;
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(entry);
    c = memref::AllocaOp::create(b, MemRefType::get({1}, i32));
  }
  e.store(e.i32(0), c, {e.idx(0)});
  return c;
}
Value readCounter(LoopEmitter &e, Value counter) {
  ImplicitLocOpBuilder &b = e.builder();
  return arith::IndexCastUIOp::create(b, b.getIndexType(),
                                      e.load(counter, {e.idx(0)}));
}
void writeCounter(LoopEmitter &e, Value v, Value counter) {
  ImplicitLocOpBuilder &b = e.builder();
  e.store(arith::IndexCastUIOp::create(b, b.getI32Type(), v), counter,
          {e.idx(0)});
}

void splitRoles(ImplicitLocOpBuilder &b, LoopEmitter &e, Block *entry,
                Value warp, int64_t consumerWarps,
                llvm::function_ref<void()> producer,
                llvm::function_ref<void()> consumer, bool persistent,
                bool gather) {
  MLIRContext *ctx = b.getContext();
  // setmaxnreg moves registers from a known count at entry (ptxas ignores
  // it otherwise: C7508).
  RegisterSplit split = registerSplit(consumerWarps, persistent, gather);
  entry->getParentOp()->setAttr(NVVM::NVVMDialect::getMaxnregAttrName(),
                                b.getI32IntegerAttr(split.entry));
  SmallVector<Operation *> moves;
  auto setMaxRegisters = [&](int32_t count, NVVM::SetMaxRegisterAction how) {
    moves.push_back(NVVM::SetMaxRegisterOp::create(
        b, b.getI32IntegerAttr(count),
        NVVM::SetMaxRegisterActionAttr::get(ctx, how)));
  };
  e.ifThenElse(
      e.le(e.idx(consumerWarps), warp),
      [&] {
        setMaxRegisters(split.producer, NVVM::SetMaxRegisterAction::decrease);
        producer();
      },
      [&] {
        setMaxRegisters(split.consumer, NVVM::SetMaxRegisterAction::increase);
        consumer();
      });
  for (Operation *move : moves)
    rematerializeAfter(move);
}

void rematerializeAfter(Operation *anchor) {
  // ptxas keeps a value that lives across setmaxnreg in local memory
  // (spill stores and loads whatever the counts): each role computes again,
  // after its setmaxnreg, what it uses of the pure computations before the
  // split (grid extents, shared addresses, thread coordinates).
  // The leaves of those computations (sizes read from the parameters,
  // block and grid ids) are copied through a side-effecting mov: otherwise
  // LLVM hoists both roles' identical copies back above the split.
  Region *region = anchor->getParentRegion();
  llvm::SetVector<Value> above;
  getUsedValuesDefinedAbove(*region, above);
  ImplicitLocOpBuilder b(anchor->getLoc(), anchor->getContext());
  b.setInsertionPointAfter(anchor);
  IRMapping cloned;
  auto launder = [&](Value v) {
    Type i64 = b.getI64Type();
    Value wide = v.getType().isIndex()
                     ? Value(arith::IndexCastOp::create(b, i64, v))
                     : Value(arith::ExtUIOp::create(b, i64, v));
    Value r = inlinePtx(b, i64, ValueRange{wide}, "mov.b64 $0, $1;", "=l,l");
    return v.getType().isIndex()
               ? Value(arith::IndexCastOp::create(b, v.getType(), r))
               : Value(arith::TruncIOp::create(b, v.getType(), r));
  };
  std::function<bool(Value)> clone = [&](Value v) {
    if (cloned.contains(v))
      return true;
    Operation *def = v.getDefiningOp();
    if (!def)
      return false; // kernel parameters stay where they are
    // Thread, block and grid ids: read again (an identical read would be
    // merged with the one above).
    auto sreg = [&](StringRef name, gpu::Dimension d) {
      std::string text =
          ("mov.u32 $0, %" + name + "." + gpu::stringifyDimension(d) + ";")
              .str();
      Value r = inlinePtx(b, b.getI32Type(), ValueRange{}, text, "=r");
      cloned.map(v, arith::IndexCastUIOp::create(b, b.getIndexType(), r));
      return true;
    };
    if (auto id = dyn_cast<gpu::ThreadIdOp>(def))
      return sreg("tid", id.getDimension());
    if (auto id = dyn_cast<gpu::BlockIdOp>(def))
      return sreg("ctaid", id.getDimension());
    if (auto id = dyn_cast<gpu::GridDimOp>(def))
      return sreg("nctaid", id.getDimension());
    if (def->getNumRegions() || !isMemoryEffectFree(def))
      return false;
    bool leaf = !def->hasTrait<OpTrait::ConstantLike>();
    for (Value operand : def->getOperands()) {
      Operation *from = operand.getDefiningOp();
      if (from && !clone(operand))
        return false;
      leaf &= !from || from->hasTrait<OpTrait::ConstantLike>();
    }
    Operation *copy = b.clone(*def, cloned);
    if (leaf)
      for (auto [result, copied] :
           llvm::zip(def->getResults(), copy->getResults()))
        if (copied.getType().isIndex() ||
            (copied.getType().isInteger() &&
             copied.getType().getIntOrFloatBitWidth() > 1))
          cloned.map(result, launder(copied));
    return true;
  };
  for (Value v : above) {
    if (!clone(v))
      continue;
    Value copy = cloned.lookup(v);
    v.replaceUsesWithIf(copy, [&](OpOperand &use) {
      return region->isAncestor(use.getOwner()->getParentRegion());
    });
  }
}

} // namespace mlir::attn::warp

Value WarpProgramTarget::searchLast(
    LoopEmitter &e, Value n, Value x,
    llvm::function_ref<Value(LoopEmitter &, Value)> key) {
  // A warp's lanes probe 32 evenly spaced candidates of [lo, hi) at once,
  // and the last that passes narrows it to one stride: ceil(log32 n)
  // dependent loads where the binary search has log2 n (its loads were
  // most of a short program's start: bench/results/2026-11-24-h100-ws.md).
  // Every lane of the warp runs it (the grid's body is not divergent).
  // sm_90a only, where it was measured: on sm_80/sm_89 the mma.sync
  // programs of fp8 caches sit at 254 registers and spilled with it.
  if (!chip.wgmma)
    return ProgramTarget::searchLast(e, n, x, key);
  return searchLoop(e, n, [&](LoopEmitter &ie, Value lo, Value hi) {
    ImplicitLocOpBuilder &ib = ie.builder();
    Type i32 = ib.getI32Type();
    Value lane =
        ie.remU(gpu::ThreadIdOp::create(ib, gpu::Dimension::x), ie.idx(kLanes));
    Value stride = ie.ceilDiv(ie.sub(hi, lo), ie.idx(kLanes));
    Value probe = ie.add(lo, ie.mul(lane, stride));
    // (Lanes past hi read hi - 1, in bounds, and do not pass.)
    Value last = ie.sub(hi, ie.idx(1));
    Value passes =
        ie.andI(ie.lt(probe, hi), ie.le(key(ie, ie.min(probe, last)), x));
    Value ballot = NVVM::VoteSyncOp::create(
        ib, i32, arith::ConstantIntOp::create(ib, i32, -1), passes,
        NVVM::VoteSyncKind::ballot);
    Value count = arith::IndexCastUIOp::create(
        ib, ib.getIndexType(), LLVM::CtPopOp::create(ib, i32, ballot));
    // Keys are non-decreasing: the passing lanes are a prefix (none where
    // key(lo) > x, which only a key(0) > x allows: lo stays).
    Value next =
        ie.add(lo, ie.mul(ie.sub(ie.max(count, ie.idx(1)), ie.idx(1)), stride));
    return std::make_pair(next, ie.min(hi, ie.add(next, stride)));
  });
}

namespace mlir::attn::warp {

bool WarpAttentionBuilder::specialize(const ProgramRows &rows,
                                      ArrayRef<KvWalk> walks,
                                      llvm::function_ref<void()> consume) {
  if (!ws)
    return false;
  if (!persistent) {
    splitRoles(
        b, e, entry, warp, g.warps, [&] { producerPart(rows, walks); },
        [&] { consumerPart(consume); }, /*persistent=*/false, gather);
    return true;
  }
  if (persistent->role == PersistentKernel::Role::Producer)
    producerPart(rows, walks);
  else
    consumerPart(consume);
  return true;
}

bool WarpAttentionBuilder::setUpGather(const ProgramRows &rows,
                                       ArrayRef<KvWalk> walks) {
  // convert-attn-to-gpu accepts producer_warps without tma only where the
  // program gathers (warpGathersKeys: prefix prefill over caches stored
  // like Q, the geometry of the pipeline), and the launch then holds the
  // producer warpgroup: no second check here that could disagree.
  // (With tma, a paged NHD walk's pages come as boxes: produceLoaded.)
  if (!shape.producerWarps || (shape.tma && !walks.front().pagedK))
    return false;
  ws = gather = true;
  ranged = walks.size() > 1;
  // fp8 caches (the first walk): staged as bytes, dequantized by the
  // producer (produceConverted).
  rawCache = isFp8(walks.front().keyType);
  walkKeyType = walks.front().keyType;
  // Prefix prefill's cache walk, or unified's one walk of NHD pages.
  f16CacheValues = rawCache && !qgmma && ct.getIntOrFloatBitWidth() == 16;
  keyScaleOnScores = rawCache && !qgmma && ct.getIntOrFloatBitWidth() == 16 &&
                     (ranged ? f16CacheValues : !walks.front().valueKeyMajor) &&
                     math.linearScores() && walks.front().keyScale;
  pingpong = pingpongApplies();
  // Q by TMA where warpTensorMaps mapped it: one expect_tx arrival. So are
  // prefix prefill's new tokens' K and V (its last walk, dense) and the
  // NHD pages of unified's one walk where both caches are mapped: see
  // produceLoaded.
  const KvWalk &fresh = walks.back();
  Value loadedK = walks.size() > 1 ? fresh.denseK : fresh.pagedK;
  Value loadedV = walks.size() > 1 ? fresh.denseV : fresh.pagedV;
  for (const TensorMapArg &m : maps) {
    if (m.operand == q && !rows.qScale && !rows.qQuantize)
      qMap = tensorMapDescriptor(b, m);
    if (loadedK && m.operand == loadedK)
      kMap = tensorMapDescriptor(b, m);
    if (loadedV && m.operand == loadedV)
      vMap = tensorMapDescriptor(b, m);
  }
  if (!kMap || !vMap)
    kMap = vMap = Value();
  if (kMap && fresh.pagedK)
    pageBoxRows = cast<nvgpu::TensorMapDescriptorType>(kMap.getType())
                      .getTensor()
                      .getDimSize(1);
  // fp8 NHD pages (unified's one walk; warpTensorMaps maps them for heads
  // of 128, one 128-byte atom a row) come as boxes into the raw ring.
  rawPagesByTma = rawCache && pageBoxRows && walks.size() == 1;
  bars = createRingBarriers(b, e, tid, consumerThreads(), /*specialized=*/true,
                            /*persistent=*/false,
                            /*fillers=*/kProducerWarps * kLanes,
                            /*rawValues=*/rawPagesByTma,
                            /*queryFillers=*/qMap ? 1 : 0);
  return true;
}

void WarpAttentionBuilder::arriveOnCopies(Value barrier) {
  // Arrives once this thread's cp.async copies so far have landed,
  // without waiting for them (noinc: the barrier counts the producer's
  // threads).
  Value address =
      nvgpu::MBarrierGetOp::create(b, b.getI64Type(), bars, barrier);
  Value pointer = LLVM::IntToPtrOp::create(
      b, LLVM::LLVMPointerType::get(b.getContext(), /*addressSpace=*/3),
      address);
  NVVM::CpAsyncMBarrierArriveOp::create(b, pointer, /*noinc=*/true);
}

void WarpAttentionBuilder::leaderLoads(Value leader, Value full,
                                       llvm::function_ref<void()> issue) {
  e.ifThenElse(
      leader,
      [&] {
        nvgpu::MBarrierArriveExpectTxOp::create(b, bars, e.idx(tileBytes(g.bn)),
                                                full, Value());
        issue();
      },
      [&] { nvgpu::MBarrierArriveOp::create(b, bars, full); });
}

void WarpAttentionBuilder::produceLoaded(const KvWalk &walk, Value lo, Value hi,
                                         Value base) {
  // A walk by TMA: the first producer thread issues each tile's boxes with
  // the bytes they bring, the other 127 arrive plainly (the full barriers
  // count the 128 producer threads, whose cp.async copies fill gathered
  // tiles). Dense walks (the new tokens) load every tile so: rows past the
  // walk are the next sequence's or zeros. Paged NHD walks (unified) load
  // a whole tile's pages (every page below hi is the sequence's); a ragged
  // tile's rows past hi may be pages the table does not name, or the slack
  // of the last page (NaN there would survive P = 0 in PV), so it is
  // gathered as produceGathered does, zero-filled past hi.
  bool paged = walk.pagedK != nullptr;
  Value bn = e.idx(g.bn);
  Value leader = e.eq(tid, e.idx(0));
  e.forLoop(lo, hi, bn, [&](Value n0) {
    Value r = e.add(base, e.divU(e.sub(n0, lo), bn));
    Value s = e.remU(r, e.idx(2));
    Value nValid = paged ? e.min(bn, e.sub(hi, n0)) : Value();
    KvBuffers buf = kvBuffers(s, walk.splitKeys);
    auto load = [&](const SharedTile &tile, Value map, Value full, Value empty,
                    bool isK) {
      awaitFree(empty, r);
      auto byTma = [&] {
        leaderLoads(leader, full, [&] {
          if (paged)
            issuePageBoxes(walk, tile, map, full, n0, isK);
          else
            issueTmaBoxes(walk, tile, map, full, n0);
        });
      };
      if (!paged)
        return byTma();
      e.ifThenElse(e.eq(nValid, bn), byTma, [&] {
        Value loopTid = tid;
        tid = pinned(tid);
        stageKeys(walk, tile, n0, nValid, isK);
        arriveOnCopies(full);
        tid = loopTid;
      });
    };
    load(buf.k, kMap, fullK(s), emptyK(s), /*isK=*/true);
    load(buf.v, vMap, fullV(s), emptyV(s), /*isK=*/false);
  });
}

Value WarpAttentionBuilder::walkStart(const KvWalk &walk, Value lo) {
  if (!pageBoxRows || !walk.pagedK)
    return lo;
  Value rows = e.idx(pageBoxRows);
  return e.mul(e.divU(lo, rows), rows);
}

void WarpAttentionBuilder::produceGathered(const KvWalk &walk, Value lo,
                                           Value hi, Value base) {
  // Every producer thread issues its share of a tile's 16-byte chunks with
  // cp.async (zero-filling what is past the keys) and has the tile's full
  // barrier track them: it completes once every producer thread's copies
  // have landed, while the producer goes on to the next tile. (The
  // consumers fence the copies for the async proxy that wgmma reads
  // through.)
  Value bn = e.idx(g.bn);
  e.forLoop(lo, hi, bn, [&](Value n0) {
    Value r = e.add(base, e.divU(e.sub(n0, lo), bn));
    Value s = e.remU(r, e.idx(2));
    Value nValid = e.min(bn, e.sub(hi, n0));
    KvBuffers buf = kvBuffers(s, walk.splitKeys);
    // The chunks' addresses are computed in the loop (LLVM otherwise hoists
    // each chunk's shared offset out of it, about 50 registers).
    Value loopTid = tid;
    tid = pinned(tid);
    awaitFree(emptyK(s), r);
    stageKeys(walk, buf.k, n0, nValid, /*isK=*/true);
    arriveOnCopies(fullK(s));
    awaitFree(emptyV(s), r);
    // A full tile of a key-major V is staged without its length: every
    // copy is whole (a copy of a run-time byte count, which a ragged tile's
    // columns need, took twice the shared wavefronts and L2 sectors).
    if (walk.valueKeyMajor)
      e.ifThenElse(
          e.eq(nValid, bn),
          [&] { stageValuesTransposed(walk, buf.vt, n0, Value()); },
          [&] { stageValuesTransposed(walk, buf.vt, n0, nValid); });
    else
      stageValues(walk, buf, n0, nValid);
    arriveOnCopies(fullV(s));
    tid = loopTid;
  });
}

void WarpAttentionBuilder::awaitFree(Value empty, Value r) {
  // The buffer's previous tile (ring position r - 2) must be consumed first.
  e.ifThen(e.le(e.idx(2), r),
           [&] { waitBarrier(empty, parityOf(e.sub(r, e.idx(2)))); });
}

void WarpAttentionBuilder::syncProducer() {
  NVVM::BarrierOp::create(b, TypeRange{}, e.i32(kProducerBarrier),
                          e.i32(kProducerWarps * kLanes),
                          NVVM::BarrierReductionAttr(), Value());
}

void WarpAttentionBuilder::produceConverted(const KvWalk &walk, Value lo,
                                            Value hi, Value base) {
  // fp8 caches: tile i's bytes are copied (cp.async, in the caches' own
  // layouts: no registers, no waiting) into raw slot i % 2 while tile
  // i - 1 is dequantized, from shared memory, into the ring the consumers
  // read (K in core matrices, V^T in 32-byte swizzled steps, as the
  // 16-bit caches' copies), fenced for the async proxy and released with a
  // plain arrival. (Decoding loads straight from global memory in the
  // producer's 128 threads waited on each load: 111 TFLOP/s.)
  Value bn = e.idx(g.bn);
  // (Scales are reloaded here: a value that lives across setmaxnreg goes
  // through local memory.)
  KeyRow any = walk.locate(e, lo);
  Value kScale = reloaded(any.kScale), vScale = reloaded(any.vScale);
  // (keyScaleOnScores: a negative k_scale negates the keys, exactly.)
  Value keySigns;
  if (keyScaleOnScores && kScale)
    keySigns = e.select(e.cmpF(arith::CmpFPredicate::OLT, kScale, e.f32(0.0)),
                        e.i32(static_cast<int32_t>(0x80808080)), e.i32(0));
  // vLLM's fp8 split-x K cache (x = 16) holds runs of 16 dims a key, which
  // the raw tile's 16-byte units keep: one copy each, a thread a key.
  // Unified's NHD pages ([blocks, page, kv_heads, D]) hold each key's K and
  // V dims contiguously: whole 16-byte runs too, and V comes as rows.
  auto kCacheType = cast<MemRefType>(any.k.getType());
  bool valueRows = !walk.valueKeyMajor;
  bool wholeRuns = valueRows || (walk.splitKeys && kCacheType.getRank() == 5 &&
                                 kCacheType.getShape().back() % 16 == 0);
  auto gatherRaw = [&](Value n0, Value nValid, const KvBuffers &raw) {
    KvTileRows tile(e, walk, n0, nValid, shape.headDim);
    for (bool isK : {true, false}) {
      if (!isK && !valueRows)
        break;
      stage(
          isK ? raw.k : raw.v, g.bn, g.dPad,
          [&](Value r) { return tile.key(r, isK, /*scaled=*/false); },
          wholeRuns && !valueRows ? ChunkOrder::Rows : ChunkOrder::RowPairs,
          /*unrollTail=*/false, /*rawChunk=*/wholeRuns ? 16 : 8);
    }
    if (!valueRows)
      stage(
          raw.vt, g.dPad, g.bn,
          [&](Value d) { return tile.valueColumn(d, g.bn); },
          ChunkOrder::ColumnPairs, /*unrollTail=*/false,
          /*rawChunk=*/copiesValueRuns16(walk) ? 16 : 8);
  };
  // rawPagesByTma: a whole tile's K and V pages are boxes that the first
  // producer thread issues on the slot's mbarrier; a ragged tile (the
  // walk's last: pages past hi may be unnamed, or hold the last page's
  // slack, whose NaN would survive P = 0 in PV) is gathered, zero-filled,
  // and the first thread arrives on the slot's barrier plainly, so that
  // every tile completes one phase of it. (The gathered copies land by
  // the wait below, as without boxes.)
  Value leader = rawPagesByTma ? e.eq(tid, e.idx(0)) : Value();
  auto copyRaw = [&](Value n0, Value slot) {
    Value nValid = e.min(bn, e.sub(hi, n0));
    KvBuffers raw = rawBuffers(slot);
    if (!rawPagesByTma)
      return gatherRaw(n0, nValid, raw);
    Value barrier = e.add(e.idx(kRawValueBarrier), slot);
    e.ifThenElse(
        e.eq(nValid, bn),
        [&] {
          e.ifThen(leader, [&] {
            nvgpu::MBarrierArriveExpectTxOp::create(
                b, bars, e.idx(2 * g.bn * g.dPad), barrier, Value());
            issuePageBoxes(walk, raw.k, kMap, barrier, n0, /*isK=*/true,
                           /*rawBytes=*/true);
            issuePageBoxes(walk, raw.v, vMap, barrier, n0, /*isK=*/false,
                           /*rawBytes=*/true);
          });
        },
        [&] {
          gatherRaw(n0, nValid, raw);
          e.ifThen(leader,
                   [&] { nvgpu::MBarrierArriveOp::create(b, bars, barrier); });
        });
  };
  Value loopTid = tid;
  tid = pinned(tid);
  copyRaw(lo, e.idx(0));
  tid = loopTid;
  commitGroup();
  e.forLoop(lo, hi, bn, [&](Value n0) {
    Value loopTid = tid;
    tid = pinned(tid);
    Value i = e.divU(e.sub(n0, lo), bn);
    Value r = e.add(base, i);
    Value s = e.remU(r, e.idx(2));
    Value next = e.add(n0, bn);
    // Every producer thread is done with raw slot (i + 1) % 2 (tile i - 1)
    // before it is refilled.
    syncProducer();
    e.ifThen(e.lt(next, hi),
             [&] { copyRaw(next, e.remU(e.add(i, e.idx(1)), e.idx(2))); });
    nvgpu::DeviceAsyncWaitOp::create(b, commitGroup(), b.getI32IntegerAttr(1));
    // Tile i's bytes, from every thread's copies (and the copy engine's:
    // phase i / 2 of its slot's barrier).
    syncProducer();
    if (rawPagesByTma)
      waitBarrier(e.add(e.idx(kRawValueBarrier), e.remU(i, e.idx(2))),
                  parityOf(i));
    KvBuffers raw = rawBuffers(e.remU(i, e.idx(2)));
    KvBuffers buf = kvBuffers(s, walk.splitKeys);
    auto fill = [&](const SharedTile &from, const SharedTile &to, int64_t rows,
                    int64_t cols, Value scale, Value full, Value empty,
                    bool asF16 = false, Value signs = Value(),
                    int64_t loadsAhead = 8) {
      awaitFree(empty, r);
      dequantize(from, to, rows, cols, scale, asF16, signs, loadsAhead);
      wgmma::fenceProxyAsync(b);
      nvgpu::MBarrierArriveOp::create(b, bars, full);
    };
    fill(raw.k, buf.k, g.bn, g.dPad, keyScaleOnScores ? Value() : kScale,
         fullK(s), emptyK(s), /*asF16=*/false, keySigns);
    // (f16 V rows with 8 loads ahead spilled 12 bytes at 56 registers.)
    if (valueRows)
      fill(raw.v, buf.v, g.bn, g.dPad, f16CacheValues ? Value() : vScale,
           fullV(s), emptyV(s), f16CacheValues, Value(),
           f16CacheValues ? 4 : 8);
    else
      fill(raw.vt, buf.vt, g.dPad, g.bn, f16CacheValues ? Value() : vScale,
           fullV(s), emptyV(s), f16CacheValues);
    tid = loopTid;
  });
  // (No copies left in flight: the last group was empty.)
  nvgpu::DeviceAsyncWaitOp::create(b, commitGroup(), b.getI32IntegerAttr(0));
}

Value WarpAttentionBuilder::reloaded(Value v) {
  auto load = v ? v.getDefiningOp<memref::LoadOp>() : memref::LoadOp();
  if (!load)
    return v;
  IRMapping map;
  for (Value index : load.getIndices()) {
    auto constant = index.getDefiningOp<arith::ConstantOp>();
    if (!constant)
      return v;
    map.map(index, b.clone(*constant)->getResult(0));
  }
  return b.clone(*load, map)->getResult(0);
}

void WarpAttentionBuilder::loadCounters() {
  ringBase = persistent ? readCounter(e, persistent->kvTiles) : e.idx(0);
  programIndex = persistent ? readCounter(e, persistent->programs) : e.idx(0);
}

void WarpAttentionBuilder::storeCounters(Value tiles) {
  if (!persistent)
    return;
  writeCounter(e, e.add(ringBase, tiles), persistent->kvTiles);
  writeCounter(e, e.add(programIndex, e.idx(1)), persistent->programs);
}

Value WarpAttentionBuilder::tilesOf(Value lo, Value hi) {
  return e.select(e.lt(lo, hi), e.ceilDiv(e.sub(hi, lo), e.idx(g.bn)),
                  e.idx(0));
}

void WarpAttentionBuilder::producerPart(const ProgramRows &rows,
                                        ArrayRef<KvWalk> walks) {
  if (gather) {
    // All 128 threads stage, counting from 0; one ring over every walk.
    Value allTid = tid;
    int64_t allThreads = threads;
    tid = e.sub(tid, e.idx(consumerThreads()));
    threads = kProducerWarps * kLanes;
    producerStaging = true;
    // Q first: QK(0) needs it with K(0). By TMA where it is mapped (the
    // producer's threads then copy only the cache pages), else landed
    // before a plain arrival.
    if (qMap) {
      e.ifThen(e.eq(tid, e.idx(0)), [&] { issueQueryTile(rows); });
    } else {
      stage(qS, g.mRows, g.dPad,
            [&](Value r) { return queryRow(rows, r, /*scaled=*/true); });
      nvgpu::DeviceAsyncWaitOp::create(b, commitGroup(),
                                       b.getI32IntegerAttr(0));
      wgmma::fenceProxyAsync(b);
      nvgpu::MBarrierArriveOp::create(b, bars, e.idx(kQueryBarrier));
    }
    Value walked = newCounter(e, entry);
    for (const KvWalk &walk : walks) {
      Value lo = walkStart(walk, walk.lo), hi = walk.hi;
      e.ifThen(e.lt(lo, hi), [&] {
        Value base = readCounter(e, walked);
        if (rawCache && &walk == &walks.front())
          produceConverted(walk, lo, hi, base);
        else if ((kMap && !walk.paged && walk.denseK) ||
                 (pageBoxRows && walk.pagedK))
          produceLoaded(walk, lo, hi, base);
        else
          produceGathered(walk, lo, hi, base);
        writeCounter(e, e.add(base, tilesOf(lo, hi)), walked);
      });
    }
    tid = allTid;
    threads = allThreads;
    producerStaging = false;
    return;
  }
  // (setUpTma: a TMA ring of one walk.)
  const KvWalk &walk = walks.front();
  if (qgmma) {
    loadCounters();
    return produceTransposed(walk, [&] { issueQueryTile(rows); });
  }
  e.ifThen(e.eq(tid, e.idx(consumerThreads())), [&] {
    loadCounters();
    auto issueQuery = [&] {
      if (!qMap)
        return;
      // A persistent block's earlier program must be done with Q.
      if (persistent)
        e.ifThen(e.lt(e.idx(0), programIndex), [&] {
          waitBarrier(e.idx(kQueryFreeBarrier),
                      e.remU(e.sub(programIndex, e.idx(1)), e.idx(2)));
        });
      issueQueryTile(rows);
    };
    if (walk.forEachBlockTile)
      return produceUnion(walk, issueQuery);
    if (!walk.forEachRange) {
      produce(walk, walk.lo, walk.hi, Value(), issueQuery);
      storeCounters(tilesOf(walk.lo, walk.hi));
      return;
    }
    // Several ranges (block-sparse CSR blocks): one ring over all their
    // tiles, numbered on from range to range.
    Value walked = newCounter(e, entry);
    walk.visitRanges(e, [&](Value lo, Value hi) {
      Value base = readCounter(e, walked);
      produce(walk, lo, hi, base, issueQuery);
      writeCounter(e, e.add(base, tilesOf(lo, hi)), walked);
    });
    Value tiles = readCounter(e, walked);
    e.ifThen(e.eq(tiles, e.idx(0)), issueQuery);
    storeCounters(tiles);
  });
}

void WarpAttentionBuilder::consumerPart(llvm::function_ref<void()> consume) {
  // P of the pending PV: nTiles S tiles of two pairs each.
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(entry);
    pState = memref::AllocaOp::create(
        b, MemRefType::get({packedPRegisters()}, pairType()));
    alphaState = memref::AllocaOp::create(
        b, MemRefType::get({rowSlots()}, b.getF32Type()));
  }
  // Lazy rescaling (softmax: O and l stay relative to a reference max
  // that moves only by more than 2^8), its branch at each step's start:
  // most tiles skip the 64-128 multiplies of O a thread (for heads of 256
  // more than the softmax's own work). On H100 (bench/results/2026-11-27-
  // h100-deferred-rescale.md) dense D=256 ran at 0.99x cuDNN (0.91-0.97x
  // in the session's calls before), block-sparse at 572 us (594). Not with
  // a P scale (fp8 P expects P <= 1), nor on three consumer warpgroups
  // (160 registers: the causal program spilled 60 bytes), nor for heads
  // over 128 in a persistent block (232 registers: 20 bytes).
  deferredRescale = !f.pScale && !g.registersFull() && g.warps <= 8 &&
                    !(persistent && g.dPad > 128);
  if (deferredRescale) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(entry);
    rescaleState =
        memref::AllocaOp::create(b, MemRefType::get({1}, b.getI1Type()));
  }
  // Walks of several ranges: the tiles walked so far and whether a PV is
  // pending (walkSpecializedRange).
  walkedLayouts.clear();
  cacheValueScale = Value();
  if (ranged) {
    walkedTiles = newCounter(e, entry);
    pendingValues = newCounter(e, entry);
  }
  // The consumers stage Q themselves when the producer does not (under
  // its first K and V copies) and synchronize among themselves.
  int64_t allThreads = threads;
  threads = consumerThreads();
  consumersOnly = straightLine = true;
  loadCounters();
  if (qgmma)
    loadFp8Scales();
  // (A persistent block's consumers overwrite the Q they read last.)
  if (persistent && !qMap)
    syncComputeThreads();
  consume();
  consumersOnly = straightLine = deferredRescale = false;
  threads = allThreads;
}

void WarpAttentionBuilder::syncComputeThreads() {
  if (!consumersOnly) {
    gpu::BarrierOp::create(b);
    return;
  }
  NVVM::BarrierOp::create(b, TypeRange{}, e.i32(kConsumerBarrier),
                          e.i32(consumerThreads()),
                          NVVM::BarrierReductionAttr(), Value());
}

void WarpAttentionBuilder::issueQueryTile(const ProgramRows &rows) {
  // Atoms of 128 bytes a row (64 columns of the compute type, 128 of fp8).
  int64_t atomCols = wgmma::kAtomRowBytes / operandBytes();
  int64_t atoms = tmaAtoms();
  nvgpu::MBarrierArriveExpectTxOp::create(b, bars, e.idx(tileBytes(g.mRows)),
                                          e.idx(kQueryBarrier), Value());
  // (The map's box: [block_q, heads_per_program, atomCols].)
  MemRefType boxType =
      cast<nvgpu::TensorMapDescriptorType>(qMap.getType()).getTensor();
  for (int64_t a = 0; a < atoms; ++a) {
    // Atom a of the query tile; rows past the program's tokens read the
    // next ones (or zeros past the tensor) and are never stored.
    Value bytes = e.add(
        alignPad, e.add(e.mul(qS.offset, e.idx(ct.getIntOrFloatBitWidth() / 8)),
                        e.idx(a * g.mRows * wgmma::kAtomRowBytes)));
    Value dst = memref::ViewOp::create(b, boxType, shared, bytes, ValueRange{});
    nvgpu::TmaAsyncLoadOp::create(
        b, dst, bars, qMap,
        ValueRange{e.idx(a * atomCols), rows.headBase, rows.qTokBase},
        e.idx(kQueryBarrier), Value(), Value());
  }
}

void WarpAttentionBuilder::produce(const KvWalk &walk, Value lo, Value hi,
                                   Value base,
                                   llvm::function_ref<void()> issueQuery) {
  Value bn = e.idx(g.bn);
  e.forLoop(lo, hi, bn, [&](Value n0) {
    Value t = e.divU(e.sub(n0, lo), bn);
    if (base)
      t = e.add(base, t);
    Value r = ringOf(t);
    Value s = e.remU(r, e.idx(2));
    KvBuffers buf = kvBuffers(s);
    auto load = [&](const SharedTile &tile, Value map, Value full,
                    Value empty) {
      awaitFree(empty, r);
      nvgpu::MBarrierArriveExpectTxOp::create(b, bars, e.idx(tileBytes(g.bn)),
                                              full, Value());
      issueTmaBoxes(walk, tile, map, full, n0);
    };
    load(buf.k, kMap, fullK(s), emptyK(s));
    // Q after the first K: in a persistent block, that K loads while the
    // previous program still reads its Q.
    e.ifThen(e.eq(t, e.idx(0)), issueQuery);
    load(buf.v, vMap, fullV(s), emptyV(s));
  });
  if (!base)
    e.ifThen(e.le(hi, lo), issueQuery);
}

void WarpAttentionBuilder::awaitTurn(Value skip) {
  if (!pingpong)
    return;
  Value group = e.toI32(e.divU(warp, e.idx(4)));
  Value id = arith::AddIOp::create(b, group, e.i32(kTurnBarrier));
  Value count = e.i32(kTurnThreads);
  e.ifThen(e.notI(skip), [&] {
    NVVM::BarrierOp::create(b, TypeRange{}, id, count,
                            NVVM::BarrierReductionAttr(), Value());
  });
}

void WarpAttentionBuilder::passTurn(Value skip) {
  if (!pingpong)
    return;
  // The next warpgroup's barrier: kTurnBarrier + (group + 1) % n.
  int64_t groups = g.warps / 4;
  Value next = e.remU(e.add(e.divU(warp, e.idx(4)), e.idx(1)), e.idx(groups));
  Value id = arith::AddIOp::create(b, e.toI32(next), e.i32(kTurnBarrier));
  Value count = e.i32(kTurnThreads);
  e.ifThen(e.notI(skip), [&] { NVVM::BarrierArriveOp::create(b, id, count); });
}

void WarpAttentionBuilder::consumeStep(const ProgramRows &rows,
                                       const KvWalk &walk, Value t, Value n0,
                                       Value nValid, bool scores, bool values,
                                       bool valuesKeyMajor, bool masked) {
  // O *= alpha(t - 1) where the softmax of t - 1 moved a row's reference:
  // no MMA of this warpgroup is in flight here (a branch there would
  // serialize them).
  if (deferredRescale && values)
    e.ifThen(e.load(rescaleState, {e.idx(0)}), [&] {
      SmallVector<Value> alpha;
      for (int64_t i = 0; i < rowSlots(); ++i)
        alpha.push_back(e.load(alphaState, {e.idx(i)}));
      scaleOutput(alpha);
    });
  // The turns (see walkSpecialized): warpgroup 0 starts without waiting,
  // and the last warpgroup hands no turn on after its last MMAs, so that
  // every wait has its arrival and none is left over.
  Value group = e.divU(warp, e.idx(4));
  Value first = e.boolean(!values), last = e.boolean(!scores);
  Value r = ringOf(t);
  Value s = e.remU(r, e.idx(2));
  Value prev, sPrev;
  if (values) {
    prev = e.sub(r, e.idx(1));
    sPrev = e.remU(prev, e.idx(2));
  }
  if (scores)
    waitBarrier(fullK(s), parityOf(r));
  if (values)
    waitBarrier(fullV(sPrev), parityOf(prev));
  // The producer's cp.async copies are generic-proxy writes; the MMAs read
  // through the async proxy.
  if (gather)
    wgmma::fenceProxyAsync(b);
  awaitTurn(e.andI(first, e.eq(group, e.idx(0))));
  // Every QK of the program is done: Q may be refilled. (Only after the
  // turn: the other warpgroup's next program then cannot hand this one a
  // second turn before it took this one.)
  if (!scores && persistent)
    releaseQuery();
  SmallVector<Value> sPending, oPending;
  if (scores) {
    cur.k = kvBuffers(s, walk.splitKeys).k;
    sPending = issueWarpgroupScores(0, g.bn);
  }
  if (values) {
    Probabilities probs;
    for (int64_t i = 0; i < packedPRegisters(); ++i)
      probs.p.push_back(e.load(pState, {e.idx(i)}));
    for (int64_t i = 0; i < rowSlots(); ++i)
      probs.alpha.push_back(e.load(alphaState, {e.idx(i)}));
    KvBuffers buf = kvBuffers(sPrev);
    cur.v = buf.v;
    cur.vt = qgmma ? transposedValues(sPrev) : buf.vt;
    oPending = issueWarpgroupPV(probs, valuesKeyMajor, 0);
  }
  passTurn(e.andI(last, e.eq(group, e.idx(g.warps / 4 - 1))));
  if (!scores) {
    // The last V is released too: a persistent block's next program
    // refills its buffer.
    storeWarpgroupOutput(oPending);
    nvgpu::MBarrierArriveOp::create(b, bars, emptyV(sPrev));
    return;
  }
  // A bias is read under branches: PV(t - 1) completes first. So it does
  // before a masked softmax on tiles that are not whole atoms (80 keys,
  // heads of 256): there P(t - 1) and S(t) next to O and the masks spilled
  // (the masked tiles are the few on a diagonal or a sequence's end).
  // fp8 heads of 256 too: O, S(t) and P(t - 1) (208 registers) next to
  // the masks spilled 32 bytes at the consumers' 240.
  bool overlap = values && !f.bias &&
                 (!masked || g.bn % wgmma::kAtomCols == 0) &&
                 !(qgmma && g.dPad > 128);
  SmallVector<Acc> sTiles = awaitScores(sPending, overlap ? 1 : 0);
  nvgpu::MBarrierArriveOp::create(b, bars, emptyK(s));
  if (values && !overlap) {
    storeWarpgroupOutput(oPending);
    nvgpu::MBarrierArriveOp::create(b, bars, emptyV(sPrev));
  }
  // P is packed once PV(t - 1), which reads the packed registers of P(t - 1),
  // is done.
  deferPack = true;
  Probabilities probs = softmax(rows, n0, nValid, masked, sTiles, 0);
  deferPack = false;
  for (auto [i, a] : llvm::enumerate(probs.alpha))
    e.store(a, alphaState, {e.idx(i)});
  if (deferredRescale)
    e.store(probs.rescale, rescaleState, {e.idx(0)});
  if (overlap) {
    storeWarpgroupOutput(oPending);
    nvgpu::MBarrierArriveOp::create(b, bars, emptyV(sPrev));
  }
  for (auto [i, p] : llvm::enumerate(qgmma ? packP8(probs.p) : packP(probs.p)))
    e.store(p, pState, {e.idx(i)});
}

void WarpAttentionBuilder::specializedStep(const ProgramRows &rows,
                                           const KvWalk &walk, Value t,
                                           Value n0, Value hi, bool scores,
                                           bool values, bool valuesKeyMajor) {
  // (Union walks: each segment's valid keys mask its columns.)
  Value nValid = !scores            ? Value()
                 : segments.empty() ? e.min(e.idx(g.bn), e.sub(hi, n0))
                                    : e.idx(g.bn);
  auto step = [&](bool masked) {
    consumeStep(rows, walk, t, n0, nValid, scores, values, valuesKeyMajor,
                masked);
  };
  if (!scores || f.bias)
    return step(/*masked=*/scores);
  e.ifThenElse(
      tileUnmasked(rows, n0, nValid), [&] { step(false); },
      [&] { step(true); });
}

void WarpAttentionBuilder::pendingStep(const ProgramRows &rows,
                                       const KvWalk &walk, Value t, Value n0,
                                       Value hi, bool scores,
                                       ArrayRef<ValueLayout> layouts,
                                       llvm::function_ref<void()> none) {
  Value pending = readCounter(e, pendingValues);
  auto withValues = [&](ArrayRef<ValueLayout> rest, auto &self) -> void {
    ValueLayout layout = rest.front();
    auto here = [&] {
      Type walkPvType = pvType;
      if (layout.f16)
        pvType = b.getF16Type();
      specializedStep(rows, walk, t, n0, hi, scores, true, layout.keyMajor);
      pvType = walkPvType;
      // (O is complete after the step: the last PV of the f16 walk.)
      if (layout.f16 && cacheValueScale)
        scaleOutput(SmallVector<Value>(rowSlots(), reloaded(cacheValueScale)));
    };
    if (rest.size() == 1)
      return here();
    e.ifThenElse(e.eq(pending, e.idx(layout.code())), here,
                 [&] { self(rest.drop_front(), self); });
  };
  auto without = [&] {
    if (scores)
      specializedStep(rows, walk, t, n0, hi, true, false, false);
    else if (none)
      none();
  };
  if (layouts.empty())
    return without();
  e.ifThenElse(
      e.notI(e.eq(pending, e.idx(0))), [&] { withValues(layouts, withValues); },
      without);
}

void WarpAttentionBuilder::walkSpecialized(const ProgramRows &rows,
                                           const KvWalk &walk, Value lo,
                                           Value hi) {
  if (ranged)
    return walkSpecializedRange(rows, walk, lo, hi);
  // Steps 0 (QK(0) only), 1 .. T - 1, and T (PV(T - 1) only) over the T
  // tiles of [lo, hi). Every warpgroup computes, even one whose rows are
  // all past the tokens: the turns need both.
  Value bn = e.idx(g.bn);
  // A raw fp8 walk of keyScaleOnScores (unified's NHD pages): its K tiles
  // hold the keys times k_scale's sign, and |k_scale| multiplies the score
  // factor, as the ranged cache walk's.
  Value programFactor = foldedFactor;
  if (keyScaleOnScores)
    foldKeyScale(walk);
  // A raw fp8 walk of f16CacheValues: P and V in f16, v_scale on O after
  // the last PV (as the ranged cache walk's).
  bool f16Walk = f16CacheValues && isFp8(walk.keyType);
  if (f16Walk) {
    valueType = pvType = b.getF16Type();
    cacheValueScale = walk.locate(e, walk.lo).vScale;
  }
  auto step = [&](Value t, Value n0, bool scores, bool values) {
    specializedStep(rows, walk, t, n0, hi, scores, values, walk.valueKeyMajor);
  };
  e.ifThenElse(
      e.lt(lo, hi),
      [&] {
        pinLaneCoordinates();
        step(e.idx(0), lo, /*scores=*/true, /*values=*/false);
        unpinLaneCoordinates();
        e.forLoop(e.add(lo, bn), hi, bn, [&](Value n0) {
          pinLaneCoordinates();
          step(e.divU(e.sub(n0, lo), bn), n0, true, true);
          unpinLaneCoordinates();
        });
        Value tiles = e.ceilDiv(e.sub(hi, lo), bn);
        step(tiles, Value(), /*scores=*/false, /*values=*/true);
        if (f16Walk && cacheValueScale)
          scaleOutput(
              SmallVector<Value>(rowSlots(), reloaded(cacheValueScale)));
      },
      [&] {
        if (persistent)
          releaseQuery();
      });
  storeCounters(tilesOf(lo, hi));
  foldedFactor = programFactor;
  valueType = pvType = Type();
}

void WarpAttentionBuilder::foldKeyScale(const KvWalk &walk) {
  // (The factor stays positive and at least the smallest normal, as
  // foldScoreFactor makes it: the keys carry k_scale's sign.)
  Value kScale = reloaded(walk.keyScale);
  foldedFactor = e.maxF(
      e.mulF(foldedFactor, e.maxF(kScale, arith::NegFOp::create(b, kScale))),
      e.f32(std::numeric_limits<float>::min()));
}

void WarpAttentionBuilder::walkSpecializedRange(const ProgramRows &rows,
                                                const KvWalk &walk, Value lo,
                                                Value hi) {
  // One range of several: the pipeline runs on across ranges (the PV of a
  // range's last tile is issued with the next range's first QK), so the
  // first step of a range has a pending PV unless it is the program's
  // first; finishWalks() issues the program's last PV.
  // The pending PV's V is laid out as its walk's: this walk's (from an
  // earlier range of it) or an earlier walk's.
  Value bn = e.idx(g.bn);
  // The raw cache walk of f16CacheValues (the program's first): its P and
  // V are f16, and O is multiplied by v_scale after its last PV (issued
  // with the next walk's first QK: pendingStep).
  bool f16Walk = f16CacheValues && walkedLayouts.empty() && isFp8(walk.keyType);
  ValueLayout layout{walk.valueKeyMajor, f16Walk};
  SmallVector<ValueLayout, 2> layouts(walkedLayouts);
  if (walk.forEachRange && !llvm::is_contained(layouts, layout))
    layouts.push_back(layout);
  if (!llvm::is_contained(walkedLayouts, layout))
    walkedLayouts.push_back(layout);
  Value programFactor = foldedFactor;
  if (f16Walk) {
    valueType = pvType = b.getF16Type();
    cacheValueScale = walk.locate(e, walk.lo).vScale;
    if (keyScaleOnScores)
      foldKeyScale(walk);
  }
  e.ifThen(e.lt(lo, hi), [&] {
    Value base = readCounter(e, walkedTiles);
    pinLaneCoordinates();
    pendingStep(rows, walk, base, lo, hi, /*scores=*/true, layouts);
    unpinLaneCoordinates();
    e.forLoop(e.add(lo, bn), hi, bn, [&](Value n0) {
      pinLaneCoordinates();
      Value t = e.add(base, e.divU(e.sub(n0, lo), bn));
      specializedStep(rows, walk, t, n0, hi, true, true, walk.valueKeyMajor);
      unpinLaneCoordinates();
    });
    writeCounter(e, e.add(base, tilesOf(lo, hi)), walkedTiles);
    writeCounter(e, e.idx(layout.code()), pendingValues);
  });
  valueType = pvType = Type();
  foldedFactor = programFactor;
}

void WarpAttentionBuilder::finishWalks(const ProgramRows &rows,
                                       ArrayRef<KvWalk> walks) {
  if (g.keyWarps > 1)
    return mergeKeyWarps();
  if (!ws || !ranged || !consumersOnly)
    return;
  Value tiles = readCounter(e, walkedTiles);
  pendingStep(rows, walks.front(), tiles, Value(), Value(), /*scores=*/false,
              walkedLayouts, [&] {
                if (persistent)
                  releaseQuery();
              });
  storeCounters(tiles);
}

void WarpAttentionBuilder::releaseQuery() {
  if (qMap)
    nvgpu::MBarrierArriveOp::create(b, bars, e.idx(kQueryFreeBarrier));
}

} // namespace mlir::attn::warp

//===- WarpKeySplit.cpp - warps that split a tile's keys ------*- C++ -*-===//
//
// Decode-shaped mma.sync programs have few rows: one 16-row slab holds a
// sequence's query tokens times the packed query heads (4 of its 16 rows
// for a decode token of GQA 4). With one warp per slab, that warp did all
// of a tile's MMAs on one SM sub-partition while the others only staged.
// Schedules of more warps than slabs instead give each of a slab's warps
// a slice of every KV tile's keys (Geometry::keyWarps; colOf, the K and V
// operand rows): each keeps its own online softmax state over its keys,
// and after the walk the slab's first warp merges the others' state and
// output, as attn.merge_states merges split-KV segments, and stores the
// rows (storesRows).
//
//===----------------------------------------------------------------------===//

#include "WarpProgram.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::warp;

namespace mlir::attn::warp {

int64_t keySplitScratchBytes(const Geometry &g) {
  if (g.keyWarps <= 1)
    return 0;
  int64_t rowWarps = g.warps / g.keyWarps;
  return rowWarps * (g.keyWarps - 1) * g.mergeWords() * kLanes * 4;
}

void WarpAttentionBuilder::mergeKeyWarps() {
  // The other warps' m, l and O go through shared memory past the query
  // tile (every warp is done with the K/V tiles after the barrier), f32
  // words lane-minor: a warp's stores and loads touch 32 banks once.
  int64_t slots = g.rowSlots(), accs = g.accumulatorElems();
  int64_t words = g.mergeWords(), others = g.keyWarps - 1;
  int64_t rowWarps = g.warps / g.keyWarps;
  Type f32 = b.getF32Type();
  Value scratch =
      view(e.idx(g.mRows * g.stride), rowWarps * others * words, kLanes, f32);
  Value keyWarp = e.remU(warp, e.idx(g.keyWarps));
  Value rowWarp = e.divU(warp, e.idx(g.keyWarps));
  auto at = [&](Value other, int64_t word) {
    Value r =
        e.add(e.mul(e.add(e.mul(rowWarp, e.idx(others)), other), e.idx(words)),
              e.idx(word));
    return SmallVector<Value>{r, lane};
  };
  gpu::BarrierOp::create(b); // every warp is done with the last tile
  Value merges = e.eq(keyWarp, e.idx(0));
  e.ifThen(arith::XOrIOp::create(b, merges, e.boolean(true)), [&] {
    Value other = e.sub(keyWarp, e.idx(1));
    for (int64_t st = 0; st < slots; ++st) {
      e.store(e.load(mState, {e.idx(st)}), scratch, at(other, st));
      e.store(e.load(lState, {e.idx(st)}), scratch, at(other, slots + st));
    }
    for (int64_t i = 0; i < accs; ++i)
      e.store(e.load(oAcc, {e.idx(i)}), scratch, at(other, 2 * slots + i));
  });
  gpu::BarrierOp::create(b);
  e.ifThen(merges, [&] {
    for (int64_t w = 0; w < others; ++w) {
      // Both states relative to the larger reference (a row no warp saw
      // a key of keeps -inf, l = 0 and O = 0).
      SmallVector<Value> mine(slots), theirs(slots);
      for (int64_t st = 0; st < slots; ++st) {
        Value m = e.load(mState, {e.idx(st)});
        Value mw = e.load(scratch, at(e.idx(w), st));
        Value mNew = e.maxF(m, mw);
        Value safe = math.safeMax(mNew);
        mine[st] = e.exp2(e.subF(m, safe));
        theirs[st] = e.exp2(e.subF(mw, safe));
        e.store(mNew, mState, {e.idx(st)});
        Value l = e.load(lState, {e.idx(st)});
        Value lw = e.load(scratch, at(e.idx(w), slots + st));
        e.store(e.addF(e.mulF(l, mine[st]), e.mulF(lw, theirs[st])), lState,
                {e.idx(st)});
      }
      for (int64_t m = 0; m < g.mFrags; ++m)
        for (int64_t dj = 0; dj < g.dTiles(); ++dj)
          for (int64_t i = 0; i < 4; ++i) {
            Value index = accIndex(m, dj, i);
            int64_t st = stateIndex(m, i / 2);
            int64_t word = 2 * slots + (m * g.dTiles() + dj) * 4 + i;
            Value o = e.load(oAcc, {index});
            Value ow = e.load(scratch, at(e.idx(w), word));
            e.store(e.addF(e.mulF(o, mine[st]), e.mulF(ow, theirs[st])), oAcc,
                    {index});
          }
    }
  });
}

} // namespace mlir::attn::warp

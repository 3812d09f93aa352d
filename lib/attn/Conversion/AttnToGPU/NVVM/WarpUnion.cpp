//===- WarpUnion.cpp - block-sparse tiles of two blocks (sm_90a) ----------===//
//
// Union walks of the Hopper pipeline (KvWalk::forEachBlockTile): block-
// sparse blocks of 64 keys paired into 128-key tiles, from the merged CSR
// lists of a program's two layout rows, or from one row's. The producer's
// elected thread merges the lists, writes each tile's entry (its blocks'
// first and valid keys per layout row) to shared memory before the tile's
// full barrier and loads each block as its own boxes; the consumers loop
// on the entries until one ends the walk, each warpgroup masking the
// blocks its layout row does not list, through the pipeline of
// WarpSpecialized.cpp (specializedStep).
//
//===----------------------------------------------------------------------===//

#include "WarpProgram.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::warp;

namespace mlir::attn::warp {

void WarpAttentionBuilder::produceUnion(const KvWalk &walk,
                                        llvm::function_ref<void()> issueQuery) {
  // Tile t is blocks 2t and 2t + 1 of the union: each block's rows (one
  // box per atom, from the block's first key) fill its half of the tile.
  // An empty second slot loads the first block again (its bytes complete
  // the tile's expect_tx; the consumers mask it). The tile's entry is
  // written before the arrival on its full barrier, which releases it to
  // the consumers' wait (and the buffer's empty barrier, awaited first,
  // says they are done with the entry of tile t - 2).
  int64_t blockRows = g.bn / 2;
  auto entryAt = [&](Value s, int64_t word) {
    return e.add(e.mul(s, e.idx(kUnionWords)), e.idx(word));
  };
  auto put = [&](Value v, Value s, int64_t word) {
    e.store(e.toI32(v), unionTiles, {entryAt(s, word)});
  };

  Value tiles =
      walk.forEachBlockTile(e, 2, [&](Value t, ArrayRef<SparseBlock> slots) {
        Value r = ringOf(t);
        Value s = e.remU(r, e.idx(2));
        KvBuffers buf = kvBuffers(s);
        awaitFree(emptyK(s), r);
        for (auto [i, slot] : llvm::enumerate(slots)) {
          Value none = e.idx(0);
          put(slot.first, s, kFirst0 + i);
          put(e.select(slot.inFirstRow, slot.valid, none), s,
              kValidFirstRow0 + i);
          put(e.select(slot.inSecondRow, slot.valid, none), s,
              kValidSecondRow0 + i);
        }
        put(e.idx(1), s, kIsTile);
        auto load = [&](const SharedTile &tile, Value map, Value full) {
          nvgpu::MBarrierArriveExpectTxOp::create(
              b, bars, e.idx(tileBytes(g.bn)), full, Value());
          for (auto [i, slot] : llvm::enumerate(slots))
            issueTmaBoxes(walk, tile, map, full, slot.first,
                          int64_t(i) * blockRows);
        };
        load(buf.k, kMap, fullK(s));
        e.ifThen(e.eq(t, e.idx(0)), issueQuery);
        awaitFree(emptyV(s), r);
        load(buf.v, vMap, fullV(s));
      });
  e.ifThen(e.eq(tiles, e.idx(0)), issueQuery);
  // The entry that ends the walk takes the next ring position of K and V
  // (no bytes), which the consumers release as a tile's.
  Value r = ringOf(tiles);
  Value s = e.remU(r, e.idx(2));
  awaitFree(emptyK(s), r);
  put(e.idx(0), s, kIsTile);
  nvgpu::MBarrierArriveOp::create(b, bars, fullK(s));
  awaitFree(emptyV(s), r);
  nvgpu::MBarrierArriveOp::create(b, bars, fullV(s));
  storeCounters(e.add(tiles, e.idx(1)));
}

void WarpAttentionBuilder::walkUnion(const ProgramRows &rows,
                                     const KvWalk &walk) {
  // The pipeline of walkSpecialized over the producer's tile entries:
  // step 0 QK(0) only, steps 1 .. T - 1 QK(t) and PV(t - 1), then
  // PV(T - 1), T known once the entry that ends the walk arrives. This
  // warpgroup's rows are one layout row's: the second's where its first
  // token is at or past walk.secondRowToken.
  Value group = e.divU(warp, e.idx(4));
  Value firstToken =
      e.divU(e.mul(group, e.idx(wgmma::kRows)), e.idx(shape.pack));
  Value second = e.le(walk.secondRowToken, firstToken);
  auto word = [&](Value s, int64_t w) {
    return e.toIndex(
        e.load(unionTiles, {e.add(e.mul(s, e.idx(kUnionWords)), e.idx(w))}));
  };
  Value zero = e.idx(0);
  SmallVector<Value> last = e.whileLoop(
      ValueRange{zero},
      [&](ValueRange state) {
        Value r = ringOf(state[0]);
        Value s = e.remU(r, e.idx(2));
        waitBarrier(fullK(s), parityOf(r));
        Value isTile = e.notI(e.eq(word(s, kIsTile), zero));
        return std::make_pair(isTile, SmallVector<Value>{state[0]});
      },
      [&](ValueRange state) {
        Value t = state[0];
        Value s = e.remU(ringOf(t), e.idx(2));
        segments.clear();
        for (int64_t i = 0; i < 2; ++i)
          segments.push_back({word(s, kFirst0 + i),
                              e.select(second, word(s, kValidSecondRow0 + i),
                                       word(s, kValidFirstRow0 + i))});
        pinLaneCoordinates();
        Value n0 = segments.front().first;
        e.ifThenElse(
            e.eq(t, zero),
            [&] {
              specializedStep(rows, walk, t, n0, Value(), /*scores=*/true,
                              /*values=*/false, walk.valueKeyMajor);
            },
            [&] {
              specializedStep(rows, walk, t, n0, Value(), true, true,
                              walk.valueKeyMajor);
            });
        unpinLaneCoordinates();
        segments.clear();
        return SmallVector<Value>{e.add(t, e.idx(1))};
      });
  Value tiles = last[0];
  e.ifThenElse(
      e.lt(zero, tiles),
      [&] {
        specializedStep(rows, walk, tiles, Value(), Value(), /*scores=*/false,
                        /*values=*/true, walk.valueKeyMajor);
      },
      [&] {
        if (persistent)
          releaseQuery();
      });
  // The end entry's buffers, released as a tile's (the producer refills
  // them two ring positions on).
  Value s = e.remU(ringOf(tiles), e.idx(2));
  nvgpu::MBarrierArriveOp::create(b, bars, emptyK(s));
  nvgpu::MBarrierArriveOp::create(b, bars, emptyV(s));
  storeCounters(e.add(tiles, e.idx(1)));
}

} // namespace mlir::attn::warp

//===- WarpAttention.h - attention programs on NVIDIA tensor cores -*- C++ -*-//
//
// The NVVM ProgramTarget: one thread block per program of the tiled grid, in
// the style of FlashAttention-2. Each warp owns a slab of one or two 16-row
// MMA fragments of the M tile (ScheduleAttr::warps); QK and PV run on
// mma.sync m16n8k16 (f16/bf16; QK of fp8 Q and K on m16n8k32 from sm_89,
// the scales applied to the dot products) fed by ldmatrix from shared
// memory, each
// K/V fragment read once per warp; K/V (and Q) tiles are staged with 16-byte
// cp.async where the source rows are contiguous and of the compute type
// (key-major V caches transposed), and through registers (gather, fp8
// dequantization) otherwise, double-buffered on 128-row tiles; the online
// softmax runs on the accumulator fragments with quad shuffles, and P stays
// in registers for PV. On sm_90a, programs of whole warpgroups run QK and
// PV on wgmma.mma_async instead (Q, K and V in 128-byte swizzled shared
// tiles, P from registers; Wgmma.h). Tiles that no mask crosses run a body
// without mask code; linear scores fold the scale into exp2's FMA; O is
// rescaled only when a row's reference max grows by more than a slack. The
// element-level math is AttentionMath's, shared with the CPU program.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_LIB_CONVERSION_ATTNTOGPU_WARPATTENTION_H
#define ATTN_LIB_CONVERSION_ATTNTOGPU_WARPATTENTION_H

#include "attn/Conversion/AttnToGPU/GpuTarget.h"
#include "attn/Target/Chips.h"

#include <optional>

namespace mlir::attn {

/// Threads and shared memory of the program of an attention op with tile
/// shape `shape` and compute type `ct` on `chip` (whose warpgroup MMAs
/// programs of whole warpgroups and swizzle atoms use).
KernelLaunch warpLaunchFor(Operation *op, const TileShape &shape, Type ct,
                           NvidiaChip chip);
/// Whether `op`'s programs of tile shape `shape` stage fp8 cache pages
/// through a raw buffer (sm_90a programs of mma.sync, single-buffered:
/// decode shapes; paged fp8 caches with one scale per program, 16-bit Q
/// and compute type, head dims a multiple of 16): the launch reserves it.
bool rawStagedFp8Keys(Operation *op, const TileShape &shape, Type ct,
                      NvidiaChip chip);
/// Whether those programs' QK reads K raw from the raw ring (attn.unified:
/// its one paged walk folds the cache scales, WarpAttentionBuilder::
/// foldCacheScales; heads that rawKeysFit), so that V is decoded into the K
/// tile's place: the launch's footprint and the builder's layout both take
/// it from here (KernelLaunch::rawKeysDirect).
bool readsRawFp8KeysDirect(Operation *op, const TileShape &shape, Type ct,
                           NvidiaChip chip);
/// Whether those programs of an attn.unified op multiply in f16 although
/// Q is bf16 (compute type `ct`): fp8 pages then decode to their f16 tiles
/// by one conversion per pair, the cache scales apply to the dot products
/// and the output, and Q is staged times a power of two that its largest
/// magnitude decides (WarpAttentionBuilder::scaleQueryForF16).
bool stagesFp8CacheAsF16(Operation *op, const TileShape &shape, Type ct,
                         NvidiaChip chip);
/// The per-warp body of that program (GpuTarget::bodyOf).
ProgramBody warpBodyOf(const TileShape &shape, NvidiaChip chip);
/// The operands of `op` its program loads through TMA (GpuTarget::
/// tensorMaps): dense K and V of flash on sm_90a warpgroup programs.
SmallVector<TensorMapRequest>
warpTensorMaps(Operation *op, const TileShape &shape, Type ct, NvidiaChip chip);
/// Whether the programs of `op` have a producer warpgroup that gathers K/V
/// with cp.async (schedule producer_warps without tma: prefix prefill and
/// unified; unified with tma: whole tiles' NHD pages by TMA boxes).
bool warpGathersKeys(Operation *op, const TileShape &shape, Type ct,
                     NvidiaChip chip);
/// Whether the sm_90a programs of block-sparse `op` under `shape` load
/// each 128-key tile as two 64-key blocks by TMA (WarpSpecialized.cpp,
/// walkUnion): two consumer warpgroups in pingpong beside the producer.
bool warpPairsBlocks(Operation *op, const TileShape &shape, NvidiaChip chip);
/// warpPairsBlocks for programs of two layout rows: each consumer
/// warpgroup one row of 64 query tokens of one head, the tiles' blocks
/// the rows' union.
bool warpWalksLayoutRowPairs(Operation *op, const TileShape &shape, Type ct,
                             NvidiaChip chip);

/// What the programs of a persistent kernel (schedule `persistent`) share:
/// WarpProgramTarget::grid sets it up once per block, then emits each
/// role's loop over the programs, where the builder emits that role's part
/// of a program only.
struct PersistentKernel {
  enum class Role { Producer, Consumer };
  Role role = Role::Consumer;
  /// The mbarrier group of the specialized ring (initialized once).
  Value barriers;
  /// memref<1xi32> counters of this thread: KV tiles walked so far (the
  /// ring's position) and programs walked so far (the query tile's phase).
  Value kvTiles, programs;
};

class WarpProgramTarget : public GpuProgramTarget {
public:
  WarpProgramTarget(Block *entry, Value shared, Type computeType,
                    int64_t threads, NvidiaChip chip, bool exactF32,
                    ArrayRef<TensorMapArg> maps = {}, bool rawFp8Keys = false,
                    bool rawKeysDirect = false)
      : GpuProgramTarget(entry, shared, computeType, threads), chip(chip),
        exactF32(exactF32), maps(maps.begin(), maps.end()),
        rawFp8Keys(rawFp8Keys), rawKeysDirect(rawKeysDirect) {}

  /// Persistent launches (KernelLaunch::persistent): the mbarriers and
  /// counters once, then the producer and consumer warpgroups each loop
  /// over the block's programs, tile by tile (KernelLaunch::
  /// claimsTileMajor) or in sections of head groups that share L2
  /// (`kvBytesPerSequence`): its own, then those its producer claims from
  /// the module's counter (any launch grid covers the programs once).
  /// Otherwise the launch grid is the program grid.
  void grid(LoopEmitter &e, ArrayRef<Value> ubs,
            llvm::function_ref<void(ValueRange)> body,
            Value kvBytesPerSequence) override;
  /// A warp-parallel search (32 probes per round).
  Value
  searchLast(LoopEmitter &e, Value n, Value x,
             llvm::function_ref<Value(LoopEmitter &, Value)> key) override;
  void setPersistent(int64_t consumerWarps, bool tileMajor) {
    persistentConsumerWarps = consumerWarps;
    claimsTileMajor = tileMajor;
  }

  void emitProgram(LoopEmitter &e, const TileShape &shape,
                   const AttentionFeatures &f, const AttentionOutput &o,
                   Value q, const ProgramRows &rows,
                   ArrayRef<KvWalk> walks) override;
  bool pairsBlocks(Operation *op, const TileShape &shape) const override {
    return warpPairsBlocks(op, shape, chip);
  }
  /// Decode-row programs that read fp8 K raw (split decode over fp8
  /// caches; WarpAttentionBuilder caps their registers for three an SM):
  /// on H200 (bench/results/2026-12-01-h200-session30.md) 1.015-1.026x at
  /// B=1..8; 16-bit split decode lost 0.2-0.7% with them.
  bool wholeMergeRounds(const TileShape &shape) const override;

protected:
  /// NVPTX's "device" scope: fence.acq_rel.gpu (lighter than membar.gl,
  /// which is fence.sc.gpu).
  StringRef deviceSyncScope() const override { return "device"; }

private:
  NvidiaChip chip;
  bool exactF32; // f32 products on 3xTF32
  SmallVector<TensorMapArg> maps;
  bool rawFp8Keys;    // KernelLaunch::rawFp8Keys
  bool rawKeysDirect; // KernelLaunch::rawKeysDirect
  /// Persistent kernels: the consumer warps (0: not persistent), and the
  /// state of the role being emitted.
  int64_t persistentConsumerWarps = 0;
  bool claimsTileMajor = false;
  std::optional<PersistentKernel> persistent;
};

} // namespace mlir::attn

#endif // ATTN_LIB_CONVERSION_ATTNTOGPU_WARPATTENTION_H

//===- WarpProgram.h - the NVVM warp program builder ------------*- C++ -*-===//
//
// Internal to the NVVM program target (WarpAttention.h): the static geometry
// of a program and the builder that emits it, split by responsibility over
// WarpAttention.cpp (the program: Q, KV walks, softmax, epilogue),
// WarpStaging.cpp (shared-memory tiles and their staging), WarpMma.cpp
// (tensor-core operands and MMAs: mma.sync, wgmma) and WarpLaunch.cpp
// (block size, shared-memory footprint and tensor maps of a launch).
//
// Fragment layouts are those of mma.sync.m16n8k16 (PTX ISA, "Matrix
// Fragments for mma.m16n8k16"): with lane = 4 * quadRow + quadCol, a thread
// holds accumulator elements (quadRow + 8 * (i / 2), 2 * quadCol + i % 2),
// i = 0..3, of each 16x8 tile. The S accumulator of QK therefore has the
// layout of PV's A operand, so P never leaves registers; row statistics
// reduce over the four lanes of a quad with two xor shuffles. f32 programs
// run mma.sync.m16n8k8 on tf32 (Mma k of 8; WarpTf32.cpp), whose
// accumulator layout is the same. wgmma's
// m64nNk16 accumulators are, per warp, those of N / 8 such tiles, and its
// register A operand is mma.sync's, so the softmax is shared.
//
// Per-thread state (running max, sum, output accumulator) lives in small
// arrays allocated in the kernel's entry block and indexed only by
// constants, so LLVM promotes them to registers (the resource lit test checks
// that no kernel has a stack frame).
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_LIB_CONVERSION_ATTNTOGPU_WARPPROGRAM_H
#define ATTN_LIB_CONVERSION_ATTNTOGPU_WARPPROGRAM_H

#include "WarpAttention.h"
#include "Wgmma.h"
#include "attn/Conversion/AttnToGPU/AttentionProgram.h"
#include "attn/IR/AttnOps.h"

#include <optional>

namespace mlir::attn::warp {

/// The gathering producer copies the raw fp8 V^T tiles of `walk` in runs
/// of 16 keys of one page (16 bytes), which needs tiles starting at
/// multiples of 16: WarpProgramTarget::emitProgram rounds such a walk's
/// start down to one.
inline bool copiesValueRuns16(const KvWalk &walk) {
  return isFp8(walk.keyType) && walk.valueKeyMajor && walk.valueRun > 0 &&
         walk.valueRun % 16 == 0;
}

constexpr int64_t kLanes = 32;
/// The producer warpgroup of warp-specialized programs.
constexpr int64_t kProducerWarps = 4;

/// Static tile geometry of a program. Warp w owns rows
/// [w * warpRows(), (w + 1) * warpRows()): mFrags 16-row MMA tiles that
/// share every K/V fragment read from shared memory.
struct Geometry {
  int64_t chunk; // elements per 16 bytes (an ldmatrix row): 8, or 4 of f32
  int64_t warps;
  int64_t mFrags;
  int64_t mRows;  // M tile rows: warps * 16 * mFrags
  int64_t dPad;   // head dim rounded up to 16 (the MMA k, or two of tf32)
  int64_t stride; // shared-memory row stride in elements: 16 bytes of
                  // padding keep ldmatrix rows in distinct banks
  int64_t bn;
  int64_t vtStride; // row stride of V staged transposed ([dPad, bn])
  int64_t stages;   // K/V buffers: 2 double-buffers the KV walk
  /// Warpgroup MMAs (sm_90a): each group of 4 warps computes 64 rows with
  /// wgmma.mma_async, Q and K/V staged in 128-byte swizzled atoms (no
  /// padding) that the MMAs read through descriptors.
  bool wgmma = false;
  /// Warps that share each row slab, each computing its own keys of every
  /// KV tile (warpKeys of them) with its own softmax state, merged after
  /// the walk: schedules of more warps than 16-row slabs (decode-shaped
  /// programs, whose few rows would leave the other warps idle).
  int64_t keyWarps = 1;
  int64_t warpRows() const { return 16 * mFrags; }
  int64_t warpKeys() const { return bn / keyWarps; }
  /// Rows a thread keeps softmax state for, and its f32 O accumulators.
  int64_t rowSlots() const { return 2 * mFrags; }
  int64_t accumulatorElems() const { return mFrags * dTiles() * 4; }
  /// f32 words a lane hands over when warps that split the keys merge:
  /// m and l of each row slot, then O (WarpKeySplit.cpp).
  int64_t mergeWords() const { return 2 * rowSlots() + accumulatorElems(); }
  /// Elements of one MMA k step: two ldmatrix columns (k16, or tf32's k8).
  int64_t kElems() const { return 2 * chunk; }
  /// Elements of the V buffer: a [bn, D] tile or a transposed [D, bn] one.
  int64_t vElems() const { return std::max(bn * stride, dPad * vtStride); }
  int64_t kvElems() const { return bn * stride + vElems(); }
  int64_t nTiles() const { return warpKeys() / 8; } // a warp's 8-key S tiles
  int64_t dTiles() const { return dPad / 8; }       // 8-dim O tiles
  /// Whether S and O of a warp about fill the registers (two fragments of a
  /// wide S over a wide O): Q is then read from shared memory one k step at
  /// a time, and O is rescaled on every tile.
  bool registersFull() const { return mFrags > 1 && bn >= 64 && dPad >= 128; }
};

/// The mbarrier of the query tile in warp-specialized programs (after
/// fullK, fullV, emptyK, emptyV of the two buffers).
constexpr int64_t kQueryBarrier = 8;
/// Persistent programs: the consumers' release of the query tile (the
/// producer loads the next program's Q once every consumer arrived).
constexpr int64_t kQueryFreeBarrier = 9;
/// fp8 wgmma programs: the raw V tile of buffer s has landed (TMA) at
/// kRawValueBarrier + s; the producer then transposes it.
constexpr int64_t kRawValueBarrier = 10;
/// Persistent kernels (none of fp8 wgmma): the hand-over of each block's
/// claimed programs (WarpProgramTarget::grid) through two shared words:
/// word s written (kClaimFullBarrier + s), and read by every thread
/// (kClaimEmptyBarrier + s).
constexpr int64_t kClaimFullBarrier = 10, kClaimEmptyBarrier = 12;
/// Polling rounds per mbarrier.try_wait before it retries (the suspend
/// time hint).
constexpr int64_t kWaitTicks = 10000000;

/// Shared memory past the tiles that lets the swizzled tiles start on a
/// 1024-byte boundary (the descriptors' base offset is 0).
constexpr int64_t kAlignSlack = wgmma::kGroupBytes;

/// Bytes past each raw K row of decode-shaped fp8 programs whose rows are
/// not whole 128-byte lines (rawRing; whole lines are swizzled instead).
constexpr int64_t kRawKeyPad = 16;

/// The geometry of a program with tile shape `s` and compute-type elements
/// of `elemBytes`; `wgmma` allows warpgroup MMAs (NvidiaChip::wgmma; not
/// for f32).
Geometry geometryOf(const TileShape &s, bool wgmma, int64_t elemBytes);

/// Bytes of one V^T of an fp8 wgmma program: [dPad, bn] in atoms of 128
/// keys (a tile of 224 keys takes two).
inline int64_t transposedValueBytes(const Geometry &g) {
  return g.dPad * llvm::alignTo(g.bn, wgmma::kAtomRowBytes);
}

/// The key tiles an fp8 wgmma program transposes V of: 128 keys, or (heads
/// of 128 on two consumer warpgroups) whole 32-key steps up to 224, in two
/// V^T atoms (256 spilled 288 bytes beside O, S and P at 240 registers).
/// The plan keeps 128: on H200 (bench/results/2026-12-01-h200-fp8-key-
/// tiles.log) 160-224 keys ran 1-10% slower at 2048 and 8192 keys.
inline bool fp8WgmmaKeys(const Geometry &g) {
  return g.bn == 128 ||
         (g.bn % 32 == 0 && g.bn <= 224 && g.dPad == 128 && g.warps == 8);
}

/// The geometry of an fp8 wgmma program (qgmma) from that of its compute
/// type (`ctBytes` an element): its tiles hold fp8 bytes, so rows of Q, K
/// and raw V are whole 128-byte atoms of fp8 and V^T rows bn bytes, still
/// counted in compute-type elements. (Sized for the compute type, a head
/// of 256 took 320 KB of shared memory; in bytes it takes 224.) The V
/// buffer then holds the raw tile TMA delivers, and each buffer's V^T
/// ([dPad, bn] fp8) lies past the K/V ring.
inline Geometry fp8WgmmaGeometry(Geometry g, int64_t ctBytes) {
  g.stride = llvm::alignTo(g.dPad, wgmma::kAtomRowBytes) / ctBytes;
  g.vtStride = g.bn / ctBytes;
  return g;
}

/// Whether a raw-staged decode program of geometry `g` may read K raw in
/// QK (WarpAttentionBuilder::rawKeysDirect; its launch then reserves two
/// raw K slots): whole 32-dim steps, heads up to 128 (heads of 256 spilled
/// 40-108 bytes with the raw operands in flight).
inline bool rawKeysFit(const Geometry &g) {
  return g.dPad % 32 == 0 && g.dPad <= 128;
}

/// Shared-memory bytes past the query tile that warps splitting the keys
/// merge through (WarpKeySplit.cpp; 0 without them).
int64_t keySplitScratchBytes(const Geometry &g);

/// Tiles whose raw bytes a raw-staged decode program (walkRawFp8) keeps in
/// flight while it computes one: two where warps split the keys (on H200,
/// 3055-3085 GB/s for fp8-cache decode against 2375-2402 at one, 2935-3080
/// at three: bench/results/2026-11-29-h200-decode-key-split.md), one
/// otherwise (a slab's warp computing alone ran no faster at two or three).
inline int64_t rawTilesAhead(const Geometry &g) {
  return g.keyWarps > 1 ? 2 : 1;
}

/// Raw K slots of such a program: one more than the tiles in flight where
/// QK reads K raw (the computed tile's K stays), as many otherwise.
inline int64_t rawKeySlots(const Geometry &g) {
  return rawTilesAhead(g) + (rawKeysFit(g) ? 1 : 0);
}

/// Whether such a program's raw K rows are whole 128-byte lines, their
/// 16-byte chunks swizzled by the row (rawRing): eight rows of one chunk
/// then fall on eight banks for QK's ldmatrix, as the padding of other
/// rows gives, and each row's copies fill one aligned line.
inline bool rawKeysSwizzled(const Geometry &g) {
  return g.dPad % wgmma::kAtomRowBytes == 0;
}

/// The bytes of a raw K row: dPad, or dPad + kRawKeyPad unless swizzled.
inline int64_t rawKeyRowBytes(const Geometry &g) {
  return rawKeysSwizzled(g) ? g.dPad : g.dPad + kRawKeyPad;
}

/// Shared-memory bytes of such a program's raw ring: K rows of
/// rawKeyRowBytes, V rows of dPad.
inline int64_t rawRingBytes(const Geometry &g) {
  return g.bn *
         (rawKeySlots(g) * rawKeyRowBytes(g) + rawTilesAhead(g) * g.dPad);
}

/// Programs an SM from which a grid of compact raw-staged decode programs
/// (kvTileElems without the K tile) launches with their compact footprint;
/// smaller grids take the K tile's bytes too (warpLaunchFor). On H200 two
/// an SM won at 264 and 512 programs (one and two whole waves of them),
/// three an SM from 576 up (1.14-1.21x at 576-704: bench/results/
/// 2026-11-30-h200-session24.md).
constexpr int64_t kCompactFromProgramsPerSM = 4;
/// 32-bit registers of an SM (sm_80 to sm_90).
constexpr int64_t kRegistersPerSM = 64 * 1024;
/// Programs an SM of the compact footprint (rawKeysDirect launches).
constexpr int64_t kCompactProgramsPerSM = 3;

/// Decode-row programs (warps splitting each tile's keys) that read fp8 K
/// raw: they launch kCompactProgramsPerSM an SM, so their registers are
/// capped for that (WarpAttentionBuilder::setUp), and their fused merge
/// takes whole rounds (WarpProgramTarget::wholeMergeRounds).
inline bool compactDecodeRows(const Geometry &g, bool rawKeysDirect) {
  return rawKeysDirect && g.keyWarps > 1;
}

/// Compute-type elements of a program's K/V tiles (after the query tile).
/// A raw-staged program whose QK reads K raw (`rawKeysDirect`) decodes
/// only V, into the K tile's place: 17 KB less for heads of 128, three
/// decode programs an SM instead of two.
inline int64_t kvTileElems(const Geometry &g, bool rawKeysDirect) {
  return g.stages * g.kvElems() - (rawKeysDirect ? g.bn * g.stride : 0);
}

/// How a [rows, cols] tile of the compute type lies in shared memory.
enum class TileLayout {
  /// Row-major with a padded stride (read by ldmatrix).
  Padded,
  /// 128-byte swizzled atoms of 64 columns for wgmma's descriptors. Atom a
  /// holds columns [64a, 64a + 64) of every row, row r at byte 128 r of the
  /// atom, and the 16-byte chunk c of that row at chunk c ^ (r % 8); `mem`
  /// is then [atoms * rows, 64], atoms of the row stride (of fp8 tiles,
  /// their bytes: fp8WgmmaGeometry). Raw fp8 tiles loaded by TMA
  /// (SharedTile::unit 16): atoms of 128 bytes, `mem` [atoms * rows, 128].
  Swizzled,
  /// wgmma's no-swizzle core matrices: chunk c of row r at 16 (c * rows + r)
  /// bytes (`mem` [cols / 8 * rows, 8]). A chunk column is contiguous, as
  /// in vLLM's split-x K cache, whose 32-byte sectors (two keys' chunks)
  /// then land on 32 contiguous bytes. (Raw fp8 tiles: chunks of
  /// SharedTile::unit elements.)
  CoreMatrices,
  /// 32-byte swizzled k steps (16 columns): step j holds columns
  /// [16j, 16j + 16) of every row, row r at byte 32 r of the step, its
  /// chunk h at h ^ (r / 4 % 2) (`mem` [cols / 8 * rows, 8]). A row of a
  /// step is one 32-byte sector of vLLM's [D, page] V cache.
  Swizzled32,
};

/// A tile of the compute type in shared memory (see TileLayout).
struct SharedTile {
  Value mem;
  Value offset; // elements from the start of the tiles
  int64_t rows = 0;
  TileLayout layout = TileLayout::Padded;
  /// Elements of a CoreMatrices or Swizzled chunk: 8, or 16 of raw fp8.
  int64_t unit = 8;
};

/// Creates the mbarriers of a TMA ring and has thread `tid` 0 initialize
/// them, then a block barrier: full/empty of the double buffer for
/// `consumers` computing threads, K and V apart plus Q's when
/// `specialized`, and Q's release when `persistent`. A full barrier
/// completes on `fillers` arrivals: 1 (the TMA issuer's expect_tx), or
/// each gathering producer thread's cp.async arrive. `rawValues`: the two
/// raw V barriers of fp8 wgmma programs (kRawValueBarrier) too.
/// `queryFillers`: Q's barrier's arrivals where they differ (0: `fillers`).
Value createRingBarriers(ImplicitLocOpBuilder &b, LoopEmitter &e, Value tid,
                         int64_t consumers, bool specialized, bool persistent,
                         int64_t fillers = 1, bool rawValues = false,
                         int64_t queryFillers = 0);

/// The descriptor type of a tensor map parameter (128-byte swizzle, zero
/// fill out of bounds) and its value from the parameter.
Value tensorMapDescriptor(ImplicitLocOpBuilder &b, const TensorMapArg &m);

/// Splits the block at warp `warp` into the producer warpgroup (warps from
/// `consumerWarps` on), which gives its registers away (setmaxnreg.dec),
/// and the consumer warpgroups, which take them; sets the kernel's entry
/// register count that setmaxnreg starts from.
/// `gather`: the producer stages with cp.async (all its threads compute
/// addresses) and keeps more registers.
void splitRoles(ImplicitLocOpBuilder &b, LoopEmitter &e, Block *entry,
                Value warp, int64_t consumerWarps,
                llvm::function_ref<void()> producer,
                llvm::function_ref<void()> consumer, bool persistent,
                bool gather = false);

/// A per-thread i32 counter (an alloca of the entry block, which LLVM
/// keeps in a register), set to 0; its value as an index, and its update.
Value newCounter(LoopEmitter &e, Block *entry);
Value readCounter(LoopEmitter &e, Value counter);
void writeCounter(LoopEmitter &e, Value v, Value counter);

/// Clones into the region of `anchor`, after it, the pure computations
/// defined above the region that it uses (see WarpSpecialized.cpp).
void rematerializeAfter(Operation *anchor);

class WarpAttentionBuilder : public AttentionProgram {
public:
  WarpAttentionBuilder(LoopEmitter &e, const TileShape &shape,
                       const AttentionFeatures &f, const AttentionOutput &o,
                       Value q, Block *entry, Value shared, Type ct,
                       int64_t threads, NvidiaChip chip, bool exactF32,
                       ArrayRef<TensorMapArg> maps = {},
                       const PersistentKernel *persistent = nullptr,
                       bool rawFp8Reserved = false, bool rawKeysDirect = false)
      : AttentionProgram(e, shape, f, o, q, entry),
        g(geometryOf(shape, chip.wgmma, ct.getIntOrFloatBitWidth() / 8)),
        shared(shared), ct(ct), threads(threads), chip(chip),
        exactF32(exactF32 && ct.isF32()), maps(maps.begin(), maps.end()),
        persistent(persistent), rawFp8Reserved(rawFp8Reserved) {
    this->rawKeysDirect = rawKeysDirect;
    narrowOutputRows = shape.producerWarps > 0;
    // (warpTensorMaps maps dense fp8 operands only for fp8 wgmma programs;
    // unified's fp8 caches, 4-D, are raw pages for the raw ring.)
    if (g.wgmma && shape.tma && shape.producerWarps &&
        llvm::any_of(maps, [](const TensorMapArg &m) {
          auto type = cast<MemRefType>(m.operand.getType());
          return type.getRank() == 3 &&
                 mlir::attn::isFp8(type.getElementType());
        }))
      g = fp8WgmmaGeometry(g, ct.getIntOrFloatBitWidth() / 8);
  }

private:
  using Acc = std::array<Value, 4>;

  // AttentionProgram's hooks: slot 2 m + h is row quadRow + 8 h of M
  // fragment m (stateIndex).
  void setUp(const ProgramRows &rows, ArrayRef<KvWalk> walks) override;
  int64_t rowSlots() const override { return g.rowSlots(); }
  int64_t accumulatorElems() const override { return g.accumulatorElems(); }
  void stageQuery(const ProgramRows &rows) override;
  Value slotRow(int64_t slot) override { return rowOf(slot / 2, slot % 2); }
  Value isRowLeader() override {
    Value leader = e.eq(quadCol, e.idx(0));
    return g.keyWarps > 1 ? e.andI(leader, storesRows()) : leader;
  }
  Value storesRows() override {
    return g.keyWarps > 1 ? e.eq(e.remU(warp, e.idx(g.keyWarps)), e.idx(0))
                          : Value();
  }
  Value reduceRow(Value x, bool isMax) override { return quadReduce(x, isMax); }
  void walkRange(const ProgramRows &rows, const KvWalk &walk, Value lo,
                 Value hi) override;
  void visitOutputs(
      int64_t slot,
      llvm::function_ref<void(Value d, Value v, bool partial)> store) override;
  bool visitOutputPairs(
      int64_t slot,
      llvm::function_ref<void(Value d, Value v0, Value v1)> store) override;
  /// Pairs traded within each quad (shuffles): the quad's four lanes hold
  /// a row's 8-column tiles 4G .. 4G + 3 as pairs; after three xor
  /// shuffles lane q holds all of tile 4G + q.
  bool visitOutputChunks(
      int64_t slot, llvm::function_ref<Value(Value, Value)> pack,
      llvm::function_ref<void(Value d, Value chunk)> store) override;

  void setUpThreads();
  /// Sets foldedFactor (see there) for linear scores.
  void foldScoreFactor();
  /// Lane coordinates that LLVM cannot hoist out of the KV loop (see
  /// pinned()), for the duration of one tile. With `staging`, the staging
  /// addresses too (tid and the tiles' address): walks whose rows each read
  /// a block table otherwise hold too many hoisted addresses next to a
  /// large accumulator.
  void pinLaneCoordinates(bool staging = false);
  void unpinLaneCoordinates();
  Value pinned(Value index);
  /// A [numRows, rowStride] view of shared memory from element `offset`
  /// (elements of the compute type), of elements `elem` (default: ct).
  Value view(int64_t offset, int64_t numRows, int64_t rowStride) {
    return view(e.idx(offset), numRows, rowStride);
  }
  Value view(Value offset, int64_t numRows, int64_t rowStride, Type elem = {});
  /// The plain tile `t` as raw fp8 (`elem`): the same bytes, twice the
  /// columns. (qk8: its compute-type view then holds pairs.)
  SharedTile bytesOf(const SharedTile &t, Type elem);
  /// k steps of the QK product: 16 dims per m16n8k16, 32 per fp8 m16n8k32,
  /// 8 per tf32 m16n8k8.
  int64_t qkSteps() const { return g.dPad / (qk8 ? 32 : g.kElems()); }
  /// Decides qk8 and dotScale for the program's walks.
  void chooseScoreOperands(const ProgramRows &rows, ArrayRef<KvWalk> walks);
  /// Sets foldsCacheScales (and dotScale, accumulatorScale) for f16 tiles
  /// of one raw-staged fp8 walk.
  void foldCacheScales(ArrayRef<KvWalk> walks);
  /// bf16 Q on f16 tiles: sets queryPrescale and scales dotScale back.
  void scaleQueryForF16(const ProgramRows &rows);
  /// The B operands of k steps kk and kk + 1 for keys 8j .. 8j + 7, read
  /// from the raw K rows and converted in registers (rawKeysDirect).
  SmallVector<Value> rawKeyOperands(int64_t j, int64_t kk);
  /// The dim whose value position `p` of a staged Q row holds under
  /// rawKeysDirect.
  Value rawKeyDim(Value p);
  /// The [rows, cols] tile at element `offset`: swizzled for wgmma, else
  /// with row stride `stride`; in `layout` where given (wgmma).
  SharedTile tile(Value offset, int64_t rows, int64_t cols, int64_t stride,
                  std::optional<TileLayout> layout = std::nullopt);
  /// Indices in t.mem of elements (r, x0 .. x0 + 7), x0 a multiple of 8.
  SmallVector<Value> tileAt(const SharedTile &t, Value r, Value x0);
  /// Shared byte address of element `elems` of tile `t` (for descriptors).
  Value tileAddress(const SharedTile &t, int64_t bytes);
  /// Which chunks of a tile a thread stages (TileStager::Hooks::place).
  enum class ChunkOrder {
    RowMajor,    // chunk tid + i * threads in row-major order
    Rows,        // chunk tid + i * threads going down the columns
    RowPairs,    // adjacent chunks 2j, 2j + 1 of a row in adjacent lanes
    ColumnPairs, // a pair of chunk columns per thread (V^T of a paged walk)
  };
  /// Stages `numRows` rows of `rowElems` elements (a multiple of 8) into
  /// `dst`, 16 bytes per thread and step. `unrollTail`: a ragged last
  /// step is unrolled too (TileStager::Hooks::unrollRaggedTail);
  /// `rawChunk`: TileStager::Hooks::rawChunkElems.
  void stage(const SharedTile &dst, int64_t numRows, int64_t rowElems,
             llvm::function_ref<StagedRow(Value)> source,
             ChunkOrder order = ChunkOrder::RowMajor, bool unrollTail = false,
             int64_t rawChunk = 8);
  /// The chunks of `chunk` elements of a [rows, cols chunks] tile this
  /// thread stages in `order` (null where the shape does not divide:
  /// row-major).
  std::function<std::pair<Value, Value>(int64_t)>
  placement(ChunkOrder order, int64_t rows, int64_t cols, int64_t chunk);
  Value commitGroup();
  /// Waits until at most `pending` of this thread's copy groups are in
  /// flight, then synchronizes the computing threads.
  void waitGroups(Value token, int32_t pending);
  /// Shared-memory views of one K/V buffer (V and its transposed form share
  /// memory).
  struct KvBuffers {
    SharedTile k, v, vt;
  };
  /// `splitKeys`: K of a split-x cache walk (KvWalk::splitKeys; the
  /// gathering producer keeps its core matrices).
  KvBuffers kvBuffers(Value stage, bool splitKeys = false);
  /// Stages K (isK) or V of keys [n0, n0 + nValid) as [bn, D] rows.
  void stageKeys(const KvWalk &walk, const SharedTile &dst, Value n0,
                 Value nValid, bool isK);
  /// Stages V of keys [n0, n0 + nValid) as a [D, bn] tile (key-major walks).
  void stageValuesTransposed(const KvWalk &walk, const SharedTile &dst,
                             Value n0, Value nValid);
  /// Stages V into `buf` in the layout the walk needs.
  void stageValues(const KvWalk &walk, const KvBuffers &buf, Value n0,
                   Value nValid);
  /// The tile math on staged K(t) and V(t): QK, softmax, PV.
  void walkDoubleBuffered(const ProgramRows &rows, const KvWalk &walk, Value lo,
                          Value hi, Value active);
  /// The tile math on the buffers in `cur` for warps with rows (`active`):
  /// the masked or the mask-free body.
  void computeTile(const ProgramRows &rows, const KvWalk &walk, Value active,
                   Value n0, Value nValid);
  /// P of one KV tile as packed pairs in accumulator layout (elements
  /// (2h, 2h + 1) of S tile j of M fragment m at (m * nTiles + j) * 2 + h),
  /// and the factors that rescale output rows (quadRow, quadRow + 8) of
  /// fragment m to the new running max, at stateIndex(m, h). Flat, so that
  /// they can be yielded from an scf.if.
  struct Probabilities {
    SmallVector<Value> p, alpha;
    /// Whether O needs the alpha rescaling at all (warp-uniform); null
    /// means always. Not carried through activeScores' scf.if.
    Value rescale;
  };
  /// Whether KV tile [n0, n0 + bn) has all its keys and every valid row
  /// sees all of them: it needs no masks. (A bias is read only where the
  /// score exists, so with a bias every tile takes the masked path.)
  Value tileUnmasked(const ProgramRows &rows, Value n0, Value nValid);
  /// S = Q K^T with the score modifiers, the masks when `masked`, and the
  /// online-softmax update.
  Probabilities scores(const ProgramRows &rows, Value n0, Value nValid,
                       bool masked);
  /// scores() for warps with rows, P = 0 and unit factors for the others.
  Probabilities activeScores(const ProgramRows &rows, Value active, Value n0,
                             Value nValid);
  /// The online-softmax update of S tiles `s` (firstTile on in the KV
  /// tile; [m * nTiles + j]): score modifiers, masks when `masked`, new
  /// running max and sum, and P.
  Probabilities softmax(const ProgramRows &rows, Value n0, Value nValid,
                        bool masked, ArrayRef<Acc> s, int64_t firstTile);
  /// The score modifiers and, when `masked`, the masks of S tiles `s`.
  SmallVector<Value> modifiedScores(const ProgramRows &rows, Value n0,
                                    Value nValid, ArrayRef<Acc> s, bool masked,
                                    int64_t firstTile);
  void accumulate(const Probabilities &probs, bool vTransposed);
  /// Pairs of f32 elements (accumulator order) packed as PV's A operand.
  SmallVector<Value> packP(ArrayRef<Value> p);
  /// O = alpha * O (only where probs.rescale, when set; nothing under
  /// deferredRescale, whose steps rescale first).
  void rescaleOutput(const Probabilities &probs);
  /// O *= alpha (per row slot).
  void scaleOutput(ArrayRef<Value> alpha);
  // wgmma (one warpgroup's 64 rows): the tile step, and its MMA groups.
  // An issue returns the accumulators in flight; awaitScores and
  // storeWarpgroupOutput wait for them.
  void warpgroupTile(const ProgramRows &rows, Value n0, Value nValid,
                     bool masked, bool vTransposed);
  /// S = Q K^T for keys [keyFirst, keyFirst + keys) of the tile.
  SmallVector<Value> issueWarpgroupScores(int64_t keyFirst, int64_t keys);
  /// S tiles of `pending` once at most `laterGroups` groups are in flight.
  SmallVector<Acc> awaitScores(ArrayRef<Value> pending, int laterGroups);
  /// O = alpha * O, then O += P V for the key steps of probs.p from kFirst.
  SmallVector<Value> issueWarpgroupPV(const Probabilities &probs,
                                      bool vTransposed, int64_t kFirst);
  void storeWarpgroupOutput(ArrayRef<Value> pending);
  // TMA (sm_90a; WarpTma.cpp): K and V tiles of dense walks copied by the
  // bulk tensor copy engine into the swizzled buffers, completing on
  // mbarriers: full[s] (the copy engine's bytes) and empty[s] (every
  // thread done with buffer s).
  /// Whether the program loads its walk's K/V by TMA; creates and
  /// initializes the mbarriers when it does.
  bool setUpTma(const ProgramRows &rows, ArrayRef<KvWalk> walks);
  /// Issues the copies of K and V of keys [n0, n0 + bn) into buffer
  /// `stage` (by one thread).
  void issueTmaTile(const KvWalk &walk, Value stage, Value n0);
  /// The double-buffered walk of TMA programs: no block barrier, so that
  /// the warpgroups drift apart (one's softmax under the other's MMAs).
  void walkTma(const ProgramRows &rows, const KvWalk &walk, Value lo, Value hi,
               Value active);
  void waitBarrier(Value index, Value parity);
  /// Issues the [rows, 1, 64] boxes of `tile` from `map` (keys [n0, n0 +
  /// rows) of the walk, rows the map's box: bn, or a block's of a union
  /// walk) into the tile's rows from `firstRow` on, completing on mbarrier
  /// `barrier`.
  void issueTmaBoxes(const KvWalk &walk, const SharedTile &tile, Value map,
                     Value barrier, Value n0, int64_t firstRow = 0);
  /// Whether the program takes a producer warpgroup that gathers K/V with
  /// cp.async (schedule producer_warps without tma: paged caches); sets up
  /// its ring when it does.
  bool setUpGather(const ProgramRows &rows, ArrayRef<KvWalk> walks);
  /// The gathering producer's loop over keys [lo, hi) of `walk`, tiles
  /// numbered on from ring position `base` (every producer thread).
  void produceGathered(const KvWalk &walk, Value lo, Value hi, Value base);
  /// The gathering producer's walk by TMA: a dense one (the new tokens), or
  /// a paged NHD one with page maps (unified: whole tiles as boxes of
  /// pages, a ragged tile by cp.async).
  void produceLoaded(const KvWalk &walk, Value lo, Value hi, Value base);
  /// A tile's TMA loads into full barrier `full`: the `leader` thread
  /// expects the tile's bytes and runs `issue`, every other producer thread
  /// arrives plainly (the full barriers count 128 arrivals).
  void leaderLoads(Value leader, Value full, llvm::function_ref<void()> issue);
  /// Issues the [1, rows, 1, atom] page boxes of `tile` (keys [n0, n0 +
  /// bn) of the walk, `isK`: K, else V), completing on mbarrier `barrier`:
  /// 128-byte atoms of the operand type, or of raw fp8 bytes (`rawBytes`).
  void issuePageBoxes(const KvWalk &walk, const SharedTile &tile, Value map,
                      Value barrier, Value n0, bool isK, bool rawBytes = false);
  /// Where a walk's tiles start: `lo`, or `lo` rounded down to whole page
  /// boxes where the producer loads pages by TMA (the keys below `lo` are
  /// masked like any other invisible key).
  Value walkStart(const KvWalk &walk, Value lo);
  /// Has mbarrier `barrier` track this thread's cp.async copies so far.
  void arriveOnCopies(Value barrier);
  /// The gathering producer's loop over keys [lo, hi) of a walk over fp8
  /// caches (rawCache): each tile's bytes are copied one tile ahead into
  /// the raw ring (cp.async, or page boxes by TMA: rawPagesByTma), then
  /// dequantized from shared memory into the ring the consumers read.
  void produceConverted(const KvWalk &walk, Value lo, Value hi, Value base);
  /// A raw fp8 tile of `rows` rows of `cols` bytes at `offset`, in 128-byte
  /// atoms whose 16-byte chunks are swizzled by the row.
  SharedTile swizzledRawTile(Value offset, int64_t rows, int64_t cols);
  /// Raw fp8 K [bn, D] and V^T [D, bn] of raw ring slot `slot`, in core
  /// matrices of 16-byte chunks (the caches' runs stay contiguous); with
  /// rawPagesByTma, K and V [bn, D] rows in 128-byte swizzled atoms.
  KvBuffers rawBuffers(Value slot);
  /// Raw K slot `keySlot` and V slot `valueSlot` of a raw-staged decode
  /// program's ring (rawKeySlots K slots, rawTilesAhead V slots): K and V
  /// [bn, D] as plain rows (vLLM's [blocks, page, Hk, D] caches, whose key
  /// rows are contiguous).
  KvBuffers rawRing(Value keySlot, Value valueSlot);
  /// Dequantizes raw tile `raw` ([rows, cols] fp8) into `dst`, `scale` (or
  /// null) applied; the threads share the work, 16 bytes at a time, going
  /// down the columns (core-matrix raw tiles) or along the rows (plain).
  /// `asF16`: the exact f16 of each byte instead, whatever the compute
  /// type (no scale). `signs` (i32, or null): xor-ed into each raw word
  /// first (0x80808080 negates). `loadsAhead`: the 16-byte loads issued
  /// before their decodes.
  void dequantize(const SharedTile &raw, const SharedTile &dst, int64_t rows,
                  int64_t cols, Value scale, bool asF16 = false,
                  Value signs = Value(), int64_t loadsAhead = 8);
  /// Whether a walk stages through the raw buffer the launch reserved
  /// (rawFp8Reserved: its fp8 pages; its scales are then `kScale`,
  /// `vScale`, left null where foldsCacheScales applies them instead).
  bool stagesRawFp8(const KvWalk &walk, Value &kScale, Value &vScale);
  /// The walk of such programs: the bytes of tiles t + 1 .. t +
  /// rawTilesAhead are copied into the raw ring while tile t computes, and
  /// each tile is dequantized from shared memory before it does.
  void walkRawFp8(const ProgramRows &rows, const KvWalk &walk, Value lo,
                  Value hi, Value active, Value kScale, Value vScale);
  /// 8 fp8 values (vector<8 x fp8>) as 8 exact f32 values.
  SmallVector<Value> decodeFp8(Value raw);
  /// 2n fp8 values (vector<2n x fp8>) as their n exact f16 pairs (i32).
  SmallVector<Value> decodeFp8Pairs(Value raw);
  /// A barrier of the producer warpgroup's threads (the raw ring).
  void syncProducer();
  /// The producer waits until the consumers released the buffer that ring
  /// position `r` refills (on mbarrier `empty`).
  void awaitFree(Value empty, Value r);
  /// `v` loaded again here when it is a load of a scalar (scales), so that
  /// it does not live across setmaxnreg.
  Value reloaded(Value v);
  // Warp specialization (WarpSpecialized.cpp; schedule producer_warps):
  // warps [g.warps, g.warps + 4) form a producer warpgroup that only
  // issues the TMA copies; the consumer warpgroups compute, K and V each on
  // their own mbarriers (fullK, fullV, emptyK, emptyV per buffer), so that
  // K(t + 2) loads once QK(t) is done, before PV(t) is.
  bool specialize(const ProgramRows &rows, ArrayRef<KvWalk> walks,
                  llvm::function_ref<void()> consume) override;
  /// The producer warpgroup's part of a program: its elected thread issues
  /// Q and every K and V tile (TMA), or all its threads gather them.
  void producerPart(const ProgramRows &rows, ArrayRef<KvWalk> walks);
  /// The consumer warpgroups' part: `consume` on their own barrier.
  void consumerPart(llvm::function_ref<void()> consume);
  /// The producer's loop over keys [lo, hi) (one elected thread);
  /// `issueQuery` runs after the first K tile is issued (or alone when the
  /// range is empty).
  /// `base` (ranged walks): the ring position of lo's tile in the
  /// program; the query tile is then issued with the program's first tile
  /// (producerPart issues it for a program without tiles).
  void produce(const KvWalk &walk, Value lo, Value hi, Value base,
               llvm::function_ref<void()> issueQuery);
  /// Tiles of [lo, hi): 0 when empty.
  Value tilesOf(Value lo, Value hi);
  /// Loads the persistent counters (ringBase, programIndex) of this
  /// program; zeros when not persistent.
  void loadCounters();
  /// Advances the persistent counters past this program's `tiles`.
  void storeCounters(Value tiles);
  /// The producer's copy of the query tile (qMap), on kQueryBarrier.
  void issueQueryTile(const ProgramRows &rows);
  /// The consumers' loop: QK(t) and PV(t - 1) issued together, the softmax
  /// of tile t under PV(t - 1) (FlashAttention-3's intra-warpgroup
  /// overlap), and with pingpong each warpgroup's MMAs issued in turn.
  void walkSpecialized(const ProgramRows &rows, const KvWalk &walk, Value lo,
                       Value hi);
  /// walkSpecialized for one of several ranges of a walk (block-sparse):
  /// the pipeline runs on from range to range.
  void walkSpecializedRange(const ProgramRows &rows, const KvWalk &walk,
                            Value lo, Value hi);
  /// Union walks (block-sparse programs over two layout rows): each tile
  /// two blocks of the rows' union (segments), each warpgroup masking the
  /// blocks its layout row does not list. The producer walks the union and
  /// hands each tile's blocks to the consumers in `unionTiles`.
  void walkUnion(const ProgramRows &rows, const KvWalk &walk) override;
  /// The producer's loop of a union walk: each tile's two blocks by TMA,
  /// after its entry of `unionTiles`; then an entry that ends the walk.
  void produceUnion(const KvWalk &walk, llvm::function_ref<void()> issueQuery);
  /// Words of a union walk's tile entry (unionTiles holds one per K/V
  /// buffer): the first keys of its two blocks, the valid keys of each for
  /// the first layout row's warpgroup and for the second's, and whether
  /// the entry is a tile (0: the walk ended).
  enum UnionWord : int64_t {
    kFirst0,
    kFirst1,
    kValidFirstRow0,
    kValidFirstRow1,
    kValidSecondRow0,
    kValidSecondRow1,
    kIsTile,
    kUnionWords = 8
  };
  /// fp8 wgmma programs (qgmma; WarpSpecialized.cpp): the producer's loop.
  /// Its elected thread loads K and the raw V of each tile by TMA (raw V
  /// one tile ahead), and all its threads transpose raw V into V^T, the
  /// K-major B operand that fp8 wgmma needs, keys permuted as packP8 lays
  /// out P.
  void produceTransposed(const KvWalk &walk,
                         llvm::function_ref<void()> issueQuery);
  /// Transposes the raw [bn, D] fp8 V tile `raw` (atoms of 128-byte
  /// swizzled rows) into `vt` ([D, bn], 128-byte swizzled), with the
  /// producer's threads: by ldmatrix and stmatrix for heads of 128 and 256
  /// (transposesByMatrices), by 32-bit words for heads of 64.
  void transposeValues(const SharedTile &raw, const SharedTile &vt);
  void transposeValuesByMatrices(const SharedTile &raw, const SharedTile &vt);
  void transposeValuesByWords(const SharedTile &raw, const SharedTile &vt);
  /// Whether V^T is written by ldmatrix/stmatrix (its key order differs:
  /// packP8 follows it). Heads of 64 keep the word transpose: beside three
  /// consumer warpgroups the matrix one ran 7% slower (bench/results/
  /// 2026-11-28-h100-fp8-matrix-transpose.md).
  bool transposesByMatrices() const { return g.dPad >= 128; }
  /// The transposed V tile of K/V buffer `stage` of fp8 wgmma programs,
  /// past the ring (fp8WgmmaGeometry).
  SharedTile transposedValues(Value stage);
  /// fp8 wgmma programs: the consumers' scales, loaded after setmaxnreg
  /// (dotScale, pScaleAbs, pScaleLog2, accumulatorScale).
  void loadFp8Scales();
  /// P (f32, accumulator order, scaled by 1 / |p_scale|) as fp8 wgmma's A
  /// registers: per 32-key step, 4 registers of 4 values each.
  SmallVector<Value> packP8(ArrayRef<Value> p);
  /// Registers of P kept for the pending PV (packP or packP8).
  int64_t packedPRegisters() const {
    return qgmma ? g.nTiles() : g.nTiles() * 2;
  }
  /// Issues the last PV of a ranged walk (see walkSpecializedRange).
  void finishWalks(const ProgramRows &rows, ArrayRef<KvWalk> walks) override;
  /// Warps that split the keys (Geometry::keyWarps): the first of each
  /// row slab takes the others' softmax state and output through shared
  /// memory and merges them into its own.
  void mergeKeyWarps();
  /// consumeStep with the masked and mask-free copies chosen per tile
  /// (keys [n0, min(n0 + bn, hi)) when `scores`).
  void specializedStep(const ProgramRows &rows, const KvWalk &walk, Value t,
                       Value n0, Value hi, bool scores, bool values,
                       bool valuesKeyMajor);
  /// One step of walkSpecialized: QK and softmax of tile t at n0 (when
  /// `scores`), PV of tile t - 1 (when `values`; its V staged key-major
  /// when `valuesKeyMajor`); `masked` as scores().
  void consumeStep(const ProgramRows &rows, const KvWalk &walk, Value t,
                   Value n0, Value nValid, bool scores, bool values,
                   bool valuesKeyMajor, bool masked);
  /// How a walk's V tiles are laid out: key-major (KvWalk::valueKeyMajor),
  /// and whether they hold f16 (f16CacheValues).
  struct ValueLayout {
    bool keyMajor = false;
    bool f16 = false;
    bool operator==(const ValueLayout &o) const {
      return keyMajor == o.keyMajor && f16 == o.f16;
    }
    /// Its pendingValues code.
    int64_t code() const { return 1 + keyMajor + 2 * f16; }
  };
  /// A ranged walk's step whose PV is that of the tile walked last, if
  /// any (pendingValues: 0 none, else its ValueLayout's code); `layouts`
  /// are the V layouts that tile can have. Without `scores`, `none` runs
  /// where no PV is pending. After the PV of an f16 walk's last tile, O
  /// is multiplied by that walk's v_scale (cacheValueScale).
  void pendingStep(const ProgramRows &rows, const KvWalk &walk, Value t,
                   Value n0, Value hi, bool scores,
                   ArrayRef<ValueLayout> layouts,
                   llvm::function_ref<void()> none = {});
  /// Persistent programs: this consumer thread is done with the query
  /// tile (kQueryFreeBarrier).
  void releaseQuery();
  /// Pingpong: waits for this warpgroup's turn at the tensor cores / hands
  /// the turn to the other one (skipped where `skip` holds).
  void awaitTurn(Value skip);
  void passTurn(Value skip);
  /// mbarrier indices of the specialized ring.
  Value fullK(Value s) { return s; }
  Value fullV(Value s) { return e.add(e.idx(2), s); }
  Value emptyK(Value s) { return e.add(e.idx(4), s); }
  Value emptyV(Value s) { return e.add(e.idx(6), s); }
  /// Phase parity of the (t / 2)-th use of buffer t % 2.
  Value parityOf(Value t) { return e.remU(e.divU(t, e.idx(2)), e.idx(2)); }
  /// 128-byte swizzle atoms of a row of a TMA tile: 64 columns of the
  /// compute type, 128 of fp8 (qgmma; a head of 64 fills half of one, the
  /// box reading zeros past the tensor's 64).
  int64_t tmaAtoms() const {
    return llvm::divideCeil(g.dPad * operandBytes(), wgmma::kAtomRowBytes);
  }
  /// Bytes of a swizzled [rows, dPad] tile of the compute type, or of fp8
  /// (qgmma) (what one TMA tile of Q, K or V delivers, zeros included).
  int64_t tileBytes(int64_t rows) const {
    return rows * tmaAtoms() * wgmma::kAtomRowBytes;
  }
  /// Bytes of an element of the tiles TMA loads.
  int64_t operandBytes() const {
    return qgmma ? 1 : ct.getIntOrFloatBitWidth() / 8;
  }
  /// The ring position of the program's tile t (tiles of earlier programs
  /// of a persistent block come first).
  Value ringOf(Value t) { return e.add(ringBase, t); }
  int64_t consumerThreads() const { return g.warps * kLanes; }
  /// A barrier of the threads that compute: the block's, or the consumer
  /// warpgroups' named barrier once the producer went its own way.
  void syncComputeThreads();
  SmallVector<Value> ldmatrix(Value tile, Value row, Value col, int numTiles,
                              bool transpose);
  Value operandReg(Value pair);
  Value pack(Value lo, Value hi);
  /// The type of a pack()ed pair of P (what activeScores yields).
  Type pairType();
  // tf32 (f32 programs, WarpTf32.cpp). An f32 operand register is its tf32
  // (cvt.rna: round to nearest) as i32, or with exactF32 the vector<2xi32>
  // of that and the tf32 of the remainder (3xTF32).
  Value tf32Operand(Value x);
  /// mma.sync.m16n8k8 tf32 of such registers: a = (g, t), (g + 8, t),
  /// (g, t + 4), (g + 8, t + 4); b = (k t, n g), (k t + 4, n g).
  Acc mmaTf32(ArrayRef<Value> a, ArrayRef<Value> bRegs, const Acc &c);
  /// O += P V of f32 programs: the k index of key step j (S tile j) is
  /// permuted so that P stays in the accumulator layout, its lane's keys
  /// 2t and 2t + 1 being k = t and t + 4; V is read as that lane's two
  /// keys at dim g of each 8-dim tile.
  void accumulateTf32(const Probabilities &probs, bool vTransposed,
                      SmallVector<Acc> &acc);
  Acc mma(ArrayRef<Value> a, ArrayRef<Value> bRegs, const Acc &c);
  /// mma.sync.m16n8k32 of fp8 Q and K (qk8): the fragments of 32 fp8
  /// values have the bytes of m16n8k16's of 16 pairs.
  Acc mmaFp8(ArrayRef<Value> a, ArrayRef<Value> bRegs, const Acc &c);
  SmallVector<Value> queryFragment(int64_t m, int64_t kStep);
  Value quadReduce(Value x, bool isMax);
  /// quadReduce of each value, the shuffles of all values interleaved.
  void quadReduce(MutableArrayRef<Value> xs, bool isMax);
  /// max or sum of `xs` as a balanced tree: short dependency chains.
  Value treeReduce(SmallVector<Value> xs, bool isMax);

  /// Row (quadRow + 8 * half) of M fragment m of this thread's warp.
  Value rowOf(int64_t m, int64_t half) {
    return e.add(e.add(warpRow0, quadRow), e.idx(16 * m + 8 * half));
  }
  /// Key (column of the KV tile) of element i of this thread's S tile j.
  Value colOf(int64_t j, int64_t i) {
    Value col = e.add(e.mul(quadCol, e.idx(2)), e.idx(8 * j + i % 2));
    return g.keyWarps > 1 ? e.add(warpKey0, col) : col;
  }
  /// Column of element i of this thread's O tile dj.
  Value dimOf(int64_t dj, int64_t i) {
    return e.add(e.mul(quadCol, e.idx(2)), e.idx(8 * dj + i % 2));
  }
  /// Element i of S tile j of fragment m among nTiles tiles per fragment.
  int64_t pIndex(int64_t m, int64_t j, int64_t i, int64_t nTiles) const {
    return (m * nTiles + j) * 4 + i;
  }
  int64_t stateIndex(int64_t m, int64_t half) const { return 2 * m + half; }
  Value accIndex(int64_t m, int64_t dj, int64_t i) {
    return e.idx((m * g.dTiles() + dj) * 4 + i);
  }

  Geometry g;
  Value shared;
  Type ct;
  int64_t threads;
  NvidiaChip chip;
  /// f32 programs multiply with 3xTF32 (about f32's accuracy) instead of
  /// one tf32 product.
  bool exactF32;
  /// fp8 Q and K multiply as stored, on mma.sync's fp8 shape (sm_89+, not
  /// warpgroups): their tiles hold the raw bytes (ldmatrix reads them as
  /// pairs), and dotScale (q scale times k scale, null for 1) scales the
  /// dot products instead of the staged elements.
  bool qk8 = false;
  Value dotScale;
  /// A walk's fp8 keys and values are decoded in registers while staging
  /// (not qk8): the program's K/V stagings unroll their ragged tails.
  bool decodesWalks = false;
  /// The raw-staged fp8 walk decodes pairs into f16 tiles without its
  /// scales, which dotScale and accumulatorScale apply (foldCacheScales).
  bool foldsCacheScales = false;
  /// bf16 Q staged into f16 tiles is multiplied by this power of two
  /// (scaleQueryForF16); null otherwise.
  Value queryPrescale;
  /// With folded scales and heads of whole 32-dim steps, QK reads K as the
  /// raw bytes (rawKeyOperands) instead of decoded tiles: Q is staged with
  /// its dims in the order those operands hold them (rawKeyDim). The
  /// launch decides it (KernelLaunch::rawKeysDirect, readsRawFp8KeysDirect)
  /// and leaves out the K tile.
  bool rawKeysDirect = false;
  /// The raw K rows as f16 pairs of bytes (walkRawFp8 sets it).
  Value rawKeyPairs;
  Type qType, kType; // element types of Q and K when qk8 or qgmma
  /// fp8 Q, K and V multiply as stored on fp8 wgmma (sm_90a warp-
  /// specialized TMA programs; multipliesFp8OnWgmma): Q and K tiles hold
  /// the raw bytes (tileBytes), V is transposed by the producer
  /// (produceTransposed), and P is scaled by 1 / |p_scale| (pScaleLog2 in
  /// the exponent), quantized to vType in registers (packP8), and the
  /// output multiplied by |p_scale| * v_scale (accumulatorScale). The tiles
  /// are sized in fp8 bytes (fp8WgmmaGeometry), V^T past the K/V ring.
  bool qgmma = false;
  Type vType;
  Value pScaleAbs, pScaleLog2;
  /// The scale operands as loaded before the roles split (loadFp8Scales
  /// loads them again).
  Value qScaleAtEntry, kScaleAtEntry, vScaleAtEntry;

  Value tid, lane, warp, quadRow, quadCol, warpRow0;
  /// The warp's first key in each KV tile (Geometry::keyWarps).
  Value warpKey0;
  /// wgmma: bytes from the dynamic shared memory to the 1024-byte aligned
  /// start of the tiles, and that start's shared address.
  Value alignPad, tilesAddress;
  std::tuple<Value, Value, Value, Value, Value>
      unpinned;                             // coordinates outside tiles
  std::tuple<Value, Value> unpinnedStaging; // tid, tilesAddress
  SharedTile qS;
  KvBuffers cur; // the buffer of the tile being computed
  SmallVector<SmallVector<SmallVector<Value>>> qFrags; // [m][kStep]
  /// Tensor maps of the kernel, and what setUpTma made of them: the maps
  /// of the walk's K and V (nvgpu descriptors), and the mbarrier group
  /// (full[0], full[1], empty[0], empty[1]).
  SmallVector<TensorMapArg> maps;
  bool tma = false;
  Value kMap, vMap, bars;
  /// Specialized programs: Q's map when the producer loads Q too.
  Value qMap;
  /// Gathering programs with page maps (kMap, vMap of the NHD caches): the
  /// rows of a page box (the page, or bn of a larger page); 0 otherwise.
  int64_t pageBoxRows = 0;
  /// Warp-specialized (a producer warpgroup; see specialize()), with
  /// pingpong between the consumer warpgroups.
  bool ws = false, pingpong = false;
  /// Whether the schedule's pingpong applies: two or three consumer
  /// warpgroups take turns (one has no one to take turns with).
  bool pingpongApplies() const {
    return shape.pingpong && (g.warps == 8 || g.warps == 12);
  }
  /// The walk visits several ranges (block-sparse, or several walks:
  /// prefix prefill's cache and new tokens): the consumers' tiles walked so
  /// far and whether a PV is pending (i32 counters).
  bool ranged = false;
  Value walkedTiles, pendingValues;
  /// The key segments of the tile a union walk's step computes: {first
  /// key, valid keys} of each block of bn / segments.size() columns, the
  /// valid keys 0 where this warpgroup's layout row does not list the
  /// block. Empty for other walks (one segment: n0 and nValid).
  SmallVector<std::pair<Value, Value>, 2> segments;
  /// Union walks: the tile entries (i32 [2 x kUnionWords], shared memory).
  Value unionTiles;
  /// V layouts of the walks emitted so far.
  SmallVector<ValueLayout, 2> walkedLayouts;
  /// The producer gathers K/V with cp.async (setUpGather): the consumers
  /// fence the generic proxy's writes before the MMAs read them.
  bool gather = false;
  /// stage() for the gathering producer: copies only
  /// (TileStager::Hooks::partialCopies).
  bool producerStaging = false;
  /// The gathering producer's cache walk is over fp8 caches, staged through
  /// the raw ring (produceConverted).
  bool rawCache = false;
  /// That walk's whole tiles of NHD pages come into the raw ring as page
  /// boxes (kMap, vMap of the fp8 caches), each slot's on its own mbarrier
  /// (kRawValueBarrier + slot); a ragged last tile is gathered.
  bool rawPagesByTma = false;
  Type walkKeyType; // the fp8 type of those caches
  /// The raw cache walk's V tiles hold the exact f16 of each byte (one
  /// conversion a pair), and its PV multiplies in f16 (P too); v_scale
  /// multiplies O once its last PV is done (prefix prefill's cache walk,
  /// the first of its ranges, and unified's one walk of NHD pages).
  bool f16CacheValues = false;
  /// The types P is packed in (valueType) and of the PV being issued
  /// (pvType): f16 inside that walk (pvType also for its last tile's PV,
  /// issued in the next walk's first step), else null (the compute type).
  Type valueType, pvType;
  /// That walk's v_scale (a load to clone: reloaded), or null.
  Value cacheValueScale;
  /// With linear scores, on prefix prefill's f16CacheValues cache walk or
  /// unified's one raw walk of NHD pages: that walk's K tiles hold the
  /// exact keys times the sign of k_scale, and |k_scale| multiplies its
  /// folded score factor instead of every key.
  bool keyScaleOnScores = false;
  /// With keyScaleOnScores: |k_scale| of `walk` into foldedFactor (the
  /// caller restores the program's factor after the walk).
  void foldKeyScale(const KvWalk &walk);
  /// Inside the consumer warps of a specialized program (`threads` is
  /// then theirs).
  bool consumersOnly = false;
  /// Persistent kernels: the role being emitted and the shared state (see
  /// WarpProgramTarget::grid); null otherwise. ringBase counts the KV tiles
  /// of the block's earlier programs, programIndex those programs.
  const PersistentKernel *persistent = nullptr;
  Value ringBase, programIndex;
  /// The launch reserved the raw buffer of decode-shaped fp8 programs
  /// (KernelLaunch::rawFp8Keys): stagesRawFp8 only checks the walk.
  bool rawFp8Reserved = false;
  /// P and the rescaling factors of the tile whose PV is still to come
  /// (walkSpecialized), as Probabilities' p and alpha; and, where the
  /// rescaling is lazy, whether it is needed at all (i1).
  Value pState, alphaState, rescaleState;
  /// The softmax keeps no branch between an MMA's issue and its wait: O is
  /// rescaled on every tile, under QK (no lazy rescaling), unless
  /// `deferredRescale`.
  bool straightLine = false;
  /// Specialized consumers with lazy rescaling: the softmax of tile t
  /// records whether O needs its alpha (rescaleState), and step t + 1
  /// rescales O under that branch first, while none of its MMAs is in
  /// flight; PV(t) then leaves O as it is.
  bool deferredRescale = false;
  /// softmax() leaves P unpacked (f32, accumulator order): the packed
  /// registers are PV's A operand, which must not be written while the
  /// previous PV still reads them (ptxas serializes the wgmma: C7513).
  bool deferPack = false;
  /// The one walk (one range) of a double-buffered warpgroup program whose
  /// first K/V tile stageQuery issues next to Q, so that the two copies
  /// overlap (walkDoubleBuffered then starts with tile 1); null otherwise.
  const KvWalk *prefetchedWalk = nullptr;
  /// For linear scores (AttentionMath::linearScoreFactor): the factor,
  /// made positive by negating the staged Q, that the softmax folds into
  /// its exp2 FMA; S then holds raw dot products. Null otherwise.
  Value foldedFactor;
};

} // namespace mlir::attn::warp

#endif // ATTN_LIB_CONVERSION_ATTNTOGPU_WARPPROGRAM_H

//===- WarpAttention.cpp - attention programs on NVIDIA tensor cores ------===//
//
// Fragment layouts are those of mma.sync.m16n8k16 (PTX ISA, "Matrix
// Fragments for mma.m16n8k16"): with lane = 4 * quadRow + quadCol, a thread
// holds accumulator elements (quadRow + 8 * (i / 2), 2 * quadCol + i % 2),
// i = 0..3, of each 16x8 tile. The S accumulator of QK therefore has the
// layout of PV's A operand, so P never leaves registers; row statistics
// reduce over the four lanes of a quad with two xor shuffles.
//
// Per-thread state (running max, sum, output accumulator) lives in small
// arrays allocated in the kernel's entry block and indexed only by
// constants, so LLVM promotes them to registers (the resource lit test checks
// that no kernel has a stack frame).
//
//===----------------------------------------------------------------------===//

#include "WarpAttention.h"
#include "Wgmma.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::attn;

namespace {
constexpr int64_t kLanes = 32;
constexpr double kLn2 = 0.6931471805599453;

int64_t roundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/// Static tile geometry of a program. Warp w owns rows
/// [w * warpRows(), (w + 1) * warpRows()): mFrags 16-row MMA tiles that
/// share every K/V fragment read from shared memory.
struct Geometry {
  int64_t warps;
  int64_t mFrags;
  int64_t mRows;  // M tile rows: warps * 16 * mFrags
  int64_t dPad;   // head dim rounded up to the MMA k of 16
  int64_t stride; // shared-memory row stride in elements: 16 bytes of
                  // padding keep ldmatrix rows in distinct banks
  int64_t bn;
  int64_t vtStride; // row stride of V staged transposed ([dPad, bn])
  int64_t stages;   // K/V buffers: 2 double-buffers the KV walk
  /// Warpgroup MMAs (sm_90a): each group of 4 warps computes 64 rows with
  /// wgmma.mma_async, Q and K/V staged in 128-byte swizzled atoms (no
  /// padding) that the MMAs read through descriptors.
  bool wgmma = false;
  int64_t warpRows() const { return 16 * mFrags; }
  /// Elements of the V buffer: a [bn, D] tile or a transposed [D, bn] one.
  int64_t vElems() const { return std::max(bn * stride, dPad * vtStride); }
  int64_t kvElems() const { return bn * stride + vElems(); }
  int64_t nTiles() const { return bn / 8; }    // 8-key S tiles
  int64_t dTiles() const { return dPad / 8; }  // 8-dim O tiles
  /// Whether S and O of a warp about fill the registers (two fragments of a
  /// wide S over a wide O): Q is then read from shared memory one k step at
  /// a time, and O is rescaled on every tile.
  bool registersFull() const { return mFrags > 1 && bn >= 64 && dPad >= 128; }
};

/// Shared memory past the tiles that lets the swizzled tiles start on a
/// 1024-byte boundary (the descriptors' base offset is 0).
constexpr int64_t kAlignSlack = wgmma::kGroupBytes;

Geometry geometryOf(const TileShape &s, bool hopper) {
  Geometry g;
  int64_t rows16 = roundUp(s.rows(), 16);
  g.warps = s.warps > 0 ? s.warps : rows16 / 16;
  g.mFrags = std::max<int64_t>(1, (rows16 / 16 + g.warps - 1) / g.warps);
  g.mRows = g.warps * 16 * g.mFrags;
  g.dPad = roundUp(s.headDim, 16);
  g.stride = g.dPad + 8;
  g.bn = roundUp(s.blockN, 16);
  g.vtStride = g.bn + 8;
  // Prefill tiles (128 rows) double-buffer K and V: one barrier per KV tile
  // instead of four. Smaller (decode) programs keep one buffer, so that more
  // of them fit on an SM.
  g.stages = g.mRows >= 128 ? 2 : 1;
  // Whole warpgroups of one fragment per warp on the double-buffered walk,
  // and tiles of whole swizzle atoms (N of an MMA is at most 256).
  g.wgmma = hopper && g.warps % 4 == 0 && g.mFrags == 1 && g.stages == 2 &&
            g.dPad % wgmma::kAtomCols == 0 && g.bn % wgmma::kAtomCols == 0 &&
            g.dPad <= 256 && g.bn <= 256;
  if (g.wgmma) {
    g.stride = g.dPad;
    g.vtStride = g.bn;
  }
  return g;
}

/// One row of a tile being staged in shared memory: element x of the row is
/// `mem[at(x)] * scale`, for x < limit (the head dim when null); the rest
/// of the row, and all of it when !valid, is zero.
struct StagedRow {
  Value valid;
  Value mem;
  std::function<SmallVector<Value>(Value)> at;
  Value scale;           // dequantization, or null
  bool chunks = false;   // elements x0 .. x0 + 7 (x0 a multiple of 8) are
                         // adjacent, x0's indices first (KeyRow::kChunks)
  Value limit;           // run-time row length, or null
};

/// A [rows, cols] tile of the compute type in shared memory: row-major with
/// a padded stride (read by ldmatrix), or in 128-byte swizzled atoms of 64
/// columns for wgmma's descriptors. Atom a holds columns [64a, 64a + 64)
/// of every row, row r at byte 128 r of the atom, and the 16-byte chunk c of
/// that row at chunk c ^ (r % 8); `mem` is then [atoms * rows, 64].
struct SharedTile {
  Value mem;
  Value offset; // elements from the start of the tiles
  int64_t rows = 0;
  bool swizzled = false;
};

class WarpAttentionBuilder {
public:
  WarpAttentionBuilder(LoopEmitter &e, const TileShape &shape,
                       const AttentionFeatures &f, const AttentionOutput &o,
                       Value q, Block *entry, Value shared, Type ct,
                       int64_t threads, bool hopper)
      : e(e), b(e.builder()), shape(shape), g(geometryOf(shape, hopper)),
        math(e, shape, f), f(f), o(o), q(q), entry(entry), shared(shared),
        ct(ct), threads(threads) {}

  void emit(const ProgramRows &rows, ArrayRef<KvWalk> walks);

private:
  using Acc = std::array<Value, 4>;

  void setUpThreads();
  /// Sets foldedFactor (see there) for linear scores.
  void foldScoreFactor();
  /// Lane coordinates that LLVM cannot hoist out of the KV loop (see
  /// pinned()), for the duration of one tile.
  void pinLaneCoordinates();
  void unpinLaneCoordinates();
  Value pinned(Value index);
  /// A [numRows, rowStride] view of shared memory from element `offset`.
  Value view(int64_t offset, int64_t numRows, int64_t rowStride) {
    return view(e.idx(offset), numRows, rowStride);
  }
  Value view(Value offset, int64_t numRows, int64_t rowStride);
  /// The [rows, cols] tile at element `offset`: swizzled for wgmma, else
  /// with row stride `stride`.
  SharedTile tile(Value offset, int64_t rows, int64_t cols, int64_t stride);
  /// Indices in t.mem of elements (r, x0 .. x0 + 7), x0 a multiple of 8.
  SmallVector<Value> tileAt(const SharedTile &t, Value r, Value x0);
  /// Shared byte address of element `elems` of tile `t` (for descriptors).
  Value tileAddress(const SharedTile &t, int64_t bytes);
  /// Stages `numRows` rows of `rowElems` elements (a multiple of 8) into
  /// `dst`, 16 bytes per thread and step.
  void stage(const SharedTile &dst, int64_t numRows, int64_t rowElems,
             llvm::function_ref<StagedRow(Value)> source);
  Value commitGroup();
  /// Waits until at most `pending` of this thread's copy groups are in
  /// flight, then synchronizes the block.
  void waitGroups(Value token, int32_t pending);
  /// Shared-memory views of one K/V buffer (V and its transposed form share
  /// memory).
  struct KvBuffers {
    SharedTile k, v, vt;
  };
  KvBuffers kvBuffers(Value stage);
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
  void walkDoubleBuffered(const ProgramRows &rows, const KvWalk &walk,
                          Value lo, Value hi, Value active);
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
  /// O = alpha * O (only where probs.rescale, when set).
  void rescaleOutput(const Probabilities &probs);
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
  SmallVector<Value> ldmatrix(Value tile, Value row, Value col, int numTiles,
                              bool transpose);
  Value operandReg(Value pair);
  Value pack(Value lo, Value hi);
  Acc mma(ArrayRef<Value> a, ArrayRef<Value> bRegs, const Acc &c);
  SmallVector<Value> queryFragment(int64_t m, int64_t kStep);
  Value quadReduce(Value x, bool isMax);
  /// quadReduce of each value, the shuffles of all values interleaved.
  void quadReduce(MutableArrayRef<Value> xs, bool isMax);
  /// max or sum of `xs` as a balanced tree: short dependency chains.
  Value treeReduce(SmallVector<Value> xs, bool isMax);
  void walkRange(const ProgramRows &rows, const KvWalk &walk, Value lo,
                 Value hi);
  void epilogue(const ProgramRows &rows);

  /// Row (quadRow + 8 * half) of M fragment m of this thread's warp.
  Value rowOf(int64_t m, int64_t half) {
    return e.add(e.add(warpRow0, quadRow), e.idx(16 * m + 8 * half));
  }
  Value colOf(int64_t j, int64_t i) {
    return e.add(e.mul(quadCol, e.idx(2)), e.idx(8 * j + i % 2));
  }
  /// Element i of S tile j of fragment m among nTiles tiles per fragment.
  int64_t pIndex(int64_t m, int64_t j, int64_t i, int64_t nTiles) const {
    return (m * nTiles + j) * 4 + i;
  }
  int64_t stateIndex(int64_t m, int64_t half) const { return 2 * m + half; }
  Value accIndex(int64_t m, int64_t dj, int64_t i) {
    return e.idx((m * g.dTiles() + dj) * 4 + i);
  }

  LoopEmitter &e;
  ImplicitLocOpBuilder &b;
  TileShape shape;
  Geometry g;
  AttentionMath math;
  const AttentionFeatures &f;
  const AttentionOutput &o;
  Value q;
  Block *entry;
  Value shared;
  Type ct;
  int64_t threads;

  Value tid, lane, warp, quadRow, quadCol, warpRow0;
  /// wgmma: bytes from the dynamic shared memory to the 1024-byte aligned
  /// start of the tiles, and that start's shared address.
  Value alignPad, tilesAddress;
  std::tuple<Value, Value, Value, Value> unpinned; // coordinates outside tiles
  SharedTile qS;
  KvBuffers cur; // the buffer of the tile being computed
  Value oAcc, mState, lState;
  SmallVector<SmallVector<SmallVector<Value>>> qFrags; // [m][kStep]
  /// For linear scores (AttentionMath::linearScoreFactor): the factor,
  /// made positive by negating the staged Q, that the softmax folds into
  /// its exp2 FMA; S then holds raw dot products. Null otherwise.
  Value foldedFactor;
};

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
  Value r = LLVM::InlineAsmOp::create(
                b, i32, ValueRange{v}, "mov.b32 $0, $1;", "=r,r",
                /*has_side_effects=*/true, /*is_align_stack=*/false,
                LLVM::tailcallkind::TailCallKind::None,
                LLVM::AsmDialectAttr(), ArrayAttr())
                .getRes();
  return arith::IndexCastOp::create(b, b.getIndexType(), r);
}

void WarpAttentionBuilder::pinLaneCoordinates() {
  unpinned = {lane, quadRow, quadCol, warpRow0};
  lane = pinned(lane);
  quadRow = e.divU(lane, e.idx(4));
  quadCol = e.remU(lane, e.idx(4));
  warpRow0 = pinned(warpRow0);
}

void WarpAttentionBuilder::unpinLaneCoordinates() {
  std::tie(lane, quadRow, quadCol, warpRow0) = unpinned;
}

Value WarpAttentionBuilder::view(Value offset, int64_t numRows,
                                 int64_t rowStride) {
  auto space = gpu::AddressSpaceAttr::get(b.getContext(),
                                          gpu::AddressSpace::Workgroup);
  auto type = MemRefType::get({numRows, rowStride}, ct,
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
  t.mem = g.wgmma ? view(offset, cols / wgmma::kAtomCols * rows,
                         wgmma::kAtomCols)
                  : view(offset, rows, stride);
  return t;
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
  // Chunks of 8 elements (16 bytes), spread over the block's threads.
  int64_t chunksPerRow = rowElems / 8, total = numRows * chunksPerRow;
  int64_t iters = (total + threads - 1) / threads;
  auto vecType = VectorType::get({8}, ct);

  struct Chunk {
    Value r, x0;
    StagedRow src;
    Value limit;
    bool vector; // whether the chunk may be one 16-byte copy
    Value whole; // it may, at run time: all 8 elements exist
    SmallVector<Value> at; // source indices of element x0
  };
  auto prepare = [&](Value c) {
    Chunk k;
    k.r = e.divU(c, e.idx(chunksPerRow));
    k.x0 = e.mul(e.remU(c, e.idx(chunksPerRow)), e.idx(8));
    k.src = source(k.r);
    k.limit = k.src.limit ? k.src.limit : e.idx(shape.headDim);
    auto srcType = cast<MemRefType>(k.src.mem.getType());
    k.vector = false;
    if (k.src.chunks && !k.src.scale && srcType.getElementType() == ct &&
        (k.src.limit || shape.headDim % 8 == 0)) {
      SmallVector<int64_t> strides;
      int64_t offset;
      k.vector = succeeded(srcType.getStridesAndOffset(strides, offset)) &&
                 strides.back() == 1;
    }
    if (k.vector) {
      k.whole = e.andI(k.src.valid, e.le(e.add(k.x0, e.idx(8)), k.limit));
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
    SmallVector<Value> elems;
    for (int64_t j = 0; j < 8; ++j) {
      Value x = e.add(k.x0, e.idx(j));
      Value ok = e.andI(k.src.valid, e.lt(x, k.limit));
      Value v = e.ifElse(
          ok, {b.getF32Type()},
          [&] {
            SmallVector<Value> at;
            if (k.src.chunks) {
              at = base;
              at.back() = e.add(at.back(), e.idx(j));
            } else {
              at = k.src.at(x);
            }
            return SmallVector<Value>{e.load32(k.src.mem, at, k.src.scale)};
          },
          [&] { return SmallVector<Value>{e.f32(0.0)}; })[0];
      elems.push_back(arith::TruncFOp::create(b, ct, v));
    }
    Value vec = vector::FromElementsOp::create(b, vecType, elems);
    vector::StoreOp::create(b, vec, dst.mem, tileAt(dst, k.r, k.x0));
  };
  auto issue = [&](const Chunk &k) {
    if (!k.vector)
      return gather(k);
    auto tokenType = nvgpu::DeviceAsyncTokenType::get(b.getContext());
    if (!k.src.limit) {
      // Rows of whole chunks: a chunk is either all there or all zero. A
      // copy of 0 source bytes zero-fills, so no branch splits the walk's
      // basic block (the source index is in range either way).
      Value n = e.select(k.whole, e.idx(8), e.idx(0));
      nvgpu::DeviceAsyncCopyOp::create(b, tokenType, dst.mem,
                                       tileAt(dst, k.r, k.x0), k.src.mem, k.at,
                                       b.getIndexAttr(8), n, b.getUnitAttr());
      return;
    }
    // 16 bytes straight from global memory into shared memory, or the
    // ragged end element by element.
    auto ifOp = scf::IfOp::create(b, k.whole, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    nvgpu::DeviceAsyncCopyOp::create(b, tokenType, dst.mem,
                                     tileAt(dst, k.r, k.x0), k.src.mem, k.at,
                                     b.getIndexAttr(8), Value(),
                                     b.getUnitAttr());
    b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
    gather(k);
  };

  if (total % threads == 0 && iters <= 32) {
    // Unrolled, with every chunk's address (block-table reads included)
    // computed before the first copy: the reads overlap instead of each
    // waiting behind the previous copy.
    SmallVector<Chunk> chunks;
    for (int64_t it = 0; it < iters; ++it)
      chunks.push_back(prepare(e.add(tid, e.idx(it * threads))));
    for (const Chunk &k : chunks)
      issue(k);
    return;
  }
  e.forLoop(0, iters, [&](Value it) {
    Value c = e.add(tid, e.mul(it, e.idx(threads)));
    e.ifThen(e.lt(c, e.idx(total)), [&] { issue(prepare(c)); });
  });
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
  gpu::BarrierOp::create(b);
}

SmallVector<Value> WarpAttentionBuilder::ldmatrix(Value tile, Value row,
                                                  Value col, int numTiles,
                                                  bool transpose) {
  auto type = VectorType::get({numTiles, 2}, ct);
  Value m = nvgpu::LdMatrixOp::create(b, type, tile, ValueRange{row, col},
                                      transpose, numTiles);
  SmallVector<Value> regs;
  for (int i = 0; i < numTiles; ++i)
    regs.push_back(operandReg(vector::ExtractOp::create(b, m, i)));
  return regs;
}

Value WarpAttentionBuilder::operandReg(Value pair) {
  // mma.sync takes f16 pairs as vector<2xf16> and bf16 pairs as i32.
  if (ct.isF16())
    return pair;
  Value asInt = vector::BitCastOp::create(
      b, VectorType::get({1}, b.getI32Type()), pair);
  return vector::ExtractOp::create(b, asInt, 0);
}

Value WarpAttentionBuilder::pack(Value lo, Value hi) {
  Value pair = vector::FromElementsOp::create(
      b, VectorType::get({2}, ct),
      ValueRange{arith::TruncFOp::create(b, ct, lo),
                 arith::TruncFOp::create(b, ct, hi)});
  return operandReg(pair);
}

WarpAttentionBuilder::Acc WarpAttentionBuilder::mma(ArrayRef<Value> a,
                                                    ArrayRef<Value> bRegs,
                                                    const Acc &c) {
  Type f32 = b.getF32Type();
  auto resType =
      LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
  NVVM::MMATypes t = ct.isF16() ? NVVM::MMATypes::f16 : NVVM::MMATypes::bf16;
  Value res = NVVM::MmaOp::create(
      b, resType, a, bRegs, ValueRange(c), {16, 8, 16}, std::nullopt,
      std::nullopt, std::array<NVVM::MMATypes, 2>{t, t},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  Acc out;
  for (int64_t i = 0; i < 4; ++i)
    out[i] = LLVM::ExtractValueOp::create(b, res, i);
  return out;
}

SmallVector<Value> WarpAttentionBuilder::queryFragment(int64_t m,
                                                      int64_t kStep) {
  if (m < static_cast<int64_t>(qFrags.size()))
    return qFrags[m][kStep];
  // A operand (16x16, row major): matrices (rows 0-7 | 8-15) x (cols 0-7 |
  // 8-15), lane l addressing row l % 8 + 8 * (l / 8 % 2), col 8 * (l / 16).
  Value row = e.add(e.add(warpRow0, e.idx(16 * m)),
                    e.add(e.remU(lane, e.idx(8)),
                          e.mul(e.remU(e.divU(lane, e.idx(8)), e.idx(2)),
                                e.idx(8))));
  Value col = e.add(e.idx(kStep * 16), e.mul(e.divU(lane, e.idx(16)), e.idx(8)));
  return ldmatrix(qS.mem, row, col, 4, /*transpose=*/false);
}

Value WarpAttentionBuilder::quadReduce(Value x, bool isMax) {
  SmallVector<Value> xs = {x};
  quadReduce(xs, isMax);
  return xs.front();
}

void WarpAttentionBuilder::quadReduce(MutableArrayRef<Value> xs, bool isMax) {
  // Each shuffle step runs over all values before the next one.
  for (int32_t offset : {1, 2}) {
    SmallVector<Value> others;
    for (Value x : xs)
      others.push_back(gpu::ShuffleOp::create(b, x, offset, kLanes,
                                              gpu::ShuffleMode::XOR)
                           .getShuffleResult());
    for (auto [x, other] : llvm::zip(xs, others))
      x = isMax ? e.maxF(x, other) : e.addF(x, other);
  }
}

Value WarpAttentionBuilder::treeReduce(SmallVector<Value> xs, bool isMax) {
  while (xs.size() > 1) {
    SmallVector<Value> next;
    for (size_t i = 0; i + 1 < xs.size(); i += 2)
      next.push_back(isMax ? e.maxF(xs[i], xs[i + 1]) : e.addF(xs[i], xs[i + 1]));
    if (xs.size() % 2)
      next.push_back(xs.back());
    xs = std::move(next);
  }
  return xs.front();
}

void WarpAttentionBuilder::emit(const ProgramRows &rows,
                                ArrayRef<KvWalk> walks) {
  setUpThreads();
  if (g.wgmma) {
    // The shared window address of the dynamic shared memory, rounded up
    // to the swizzle atoms' 1024 bytes (launches reserve kAlignSlack).
    Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, shared);
    Value atom = e.idx(wgmma::kGroupBytes);
    tilesAddress = e.mul(e.ceilDiv(base, atom), atom);
    alignPad = e.sub(tilesAddress, base);
  }
  qS = tile(e.idx(0), g.mRows, g.dPad, g.stride);
  cur = kvBuffers(e.idx(0));
  {
    // Per-thread state, promoted to registers by LLVM.
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(entry);
    Type f32 = b.getF32Type();
    oAcc = memref::AllocaOp::create(
        b, MemRefType::get({g.mFrags * g.dTiles() * 4}, f32));
    mState = memref::AllocaOp::create(b, MemRefType::get({2 * g.mFrags}, f32));
    lState = memref::AllocaOp::create(b, MemRefType::get({2 * g.mFrags}, f32));
  }

  // The query tile: row r is token r / pack, head headBase + r % pack.
  stage(qS, g.mRows, g.dPad, [&](Value r) {
    Value tok = math.tokenOf(r);
    StagedRow s;
    s.valid = e.lt(tok, rows.numTokens);
    Value qRow = e.add(rows.qTokBase,
                       e.min(tok, e.sub(rows.numTokens, e.idx(1))));
    Value head = math.headOf(rows, r);
    s.mem = q;
    s.at = [=](Value d) { return SmallVector<Value>{qRow, head, d}; };
    s.scale = rows.qScale;
    s.chunks = true;
    return s;
  });
  waitGroups(commitGroup(), 0);
  if (math.linearScores())
    foldScoreFactor();
  // Keep Q in registers when it fits next to the accumulators; otherwise
  // each KV tile reads it again from shared memory (as FlashAttention-2).
  // (wgmma reads Q from shared memory.)
  if (!g.wgmma && g.mFrags * g.dPad <= 128 && !(g.mFrags > 1 && g.bn >= 64)) {
    for (int64_t m = 0; m < g.mFrags; ++m) {
      SmallVector<SmallVector<Value>> frags;
      for (int64_t kk = 0; kk < g.dPad / 16; ++kk)
        frags.push_back(queryFragment(m, kk));
      qFrags.push_back(std::move(frags));
    }
  }

  for (int64_t m = 0; m < g.mFrags; ++m) {
    for (int64_t h = 0; h < 2; ++h) {
      auto [m0, l0] = math.initialState(rows, rowOf(m, h));
      // The sum is kept per lane and added over the quad at the end: only
      // one lane of the quad starts with the sink's 1.
      l0 = e.select(e.eq(quadCol, e.idx(0)), l0, e.f32(0.0));
      e.store(m0, mState, {e.idx(stateIndex(m, h))});
      e.store(l0, lState, {e.idx(stateIndex(m, h))});
    }
  }
  for (int64_t i = 0; i < g.mFrags * g.dTiles() * 4; ++i)
    e.store(e.f32(0.0), oAcc, {e.idx(i)});

  for (const KvWalk &walk : walks)
    walk.visitRanges(e, [&](Value lo, Value hi) {
      walkRange(rows, walk, lo, hi);
    });
  epilogue(rows);
}

void WarpAttentionBuilder::foldScoreFactor() {
  // The softmax wants maxima of factor * dot; for a positive factor those
  // are factor * (maxima of dot). A negative factor is made positive by
  // negating the staged Q, which is exact. A zero factor becomes the
  // smallest normal float, so that masked -inf scores stay -inf, not NaN.
  Value factor = math.linearScoreFactor();
  Value negative = e.cmpF(arith::CmpFPredicate::OLT, factor, e.f32(0.0));
  e.ifThen(negative, [&] {
    // Every element of the view (padding included) is negated.
    ArrayRef<int64_t> viewShape = cast<MemRefType>(qS.mem.getType()).getShape();
    int64_t chunksPerRow = viewShape[1] / 8;
    auto vecType = VectorType::get({8}, ct);
    e.forLoop(tid, e.idx(viewShape[0] * chunksPerRow), e.idx(threads),
              [&](Value c) {
                SmallVector<Value> at{e.divU(c, e.idx(chunksPerRow)),
                              e.mul(e.remU(c, e.idx(chunksPerRow)), e.idx(8))};
                Value x = vector::LoadOp::create(b, vecType, qS.mem, at);
                vector::StoreOp::create(b, arith::NegFOp::create(b, x), qS.mem,
                                        at);
              });
    if (g.wgmma)
      wgmma::fenceProxyAsync(b);
    gpu::BarrierOp::create(b);
  });
  Value magnitude =
      e.select(negative, arith::NegFOp::create(b, factor), factor);
  foldedFactor =
      e.maxF(magnitude, e.f32(std::numeric_limits<float>::min()));
}

WarpAttentionBuilder::KvBuffers WarpAttentionBuilder::kvBuffers(Value stage) {
  Value base = e.add(e.idx(g.mRows * g.stride),
                     e.mul(stage, e.idx(g.kvElems())));
  Value vBase = e.add(base, e.idx(g.bn * g.stride));
  return {tile(base, g.bn, g.dPad, g.stride), tile(vBase, g.bn, g.dPad, g.stride),
          tile(vBase, g.dPad, g.bn, g.vtStride)};
}

void WarpAttentionBuilder::stageValues(const KvWalk &walk,
                                       const KvBuffers &buf, Value n0,
                                       Value nValid) {
  if (walk.valueKeyMajor)
    stageValuesTransposed(walk, buf.vt, n0, nValid ? nValid : e.idx(g.bn));
  else
    stageKeys(walk, buf.v, n0, nValid, false);
}

void WarpAttentionBuilder::stageKeys(const KvWalk &walk,
                                     const SharedTile &dst, Value n0,
                                     Value nValid, bool isK) {
  // Rows past nValid are zero (their keys are masked, and a zero V row keeps
  // p = 0 columns from multiplying garbage).
  // A null nValid is a full tile: no clamps, so the addresses stay affine
  // in n0.
  Value lastKey = nValid ? e.add(n0, e.sub(nValid, e.idx(1))) : Value();
  stage(dst, g.bn, g.dPad, [&](Value r) {
    // Never locate past the range.
    Value key = nValid ? e.min(e.add(n0, r), lastKey) : e.add(n0, r);
    KeyRow kr = walk.locate(e, key);
    StagedRow s;
    s.valid = nValid ? e.lt(r, nValid) : e.boolean(true);
    s.mem = isK ? kr.k : kr.v;
    s.at = isK ? kr.kAt : kr.vAt;
    s.scale = isK ? kr.kScale : kr.vScale;
    s.chunks = isK ? kr.kChunks : kr.vChunks;
    return s;
  });
}

void WarpAttentionBuilder::stageValuesTransposed(const KvWalk &walk,
                                                 const SharedTile &dst,
                                                 Value n0, Value nValid) {
  // n0 is a multiple of 8 (KvWalk::valueKeyMajor), so every 8-key chunk
  // lies in one page.
  Value lastKey = e.add(n0, e.sub(nValid, e.idx(1)));
  stage(dst, g.dPad, g.bn, [&](Value d) {
    StagedRow s;
    s.valid = e.lt(d, e.idx(shape.headDim));
    KeyRow first = walk.locate(e, n0);
    s.mem = first.v;
    s.scale = first.vScale;
    s.at = [&, d](Value x) {
      return walk.locate(e, e.min(e.add(n0, x), lastKey)).vAt(d);
    };
    s.chunks = true;
    s.limit = nValid;
    return s;
  });
}

void WarpAttentionBuilder::walkRange(const ProgramRows &rows,
                                     const KvWalk &walk, Value lo, Value hi) {
  // Warps whose rows are all past the tile's tokens (decode programs, the
  // last tile of a sequence) stage and synchronize but skip the math.
  // (wgmma: a warpgroup's warps issue its MMAs together.)
  Value firstRow =
      g.wgmma ? e.mul(e.divU(warp, e.idx(4)), e.idx(wgmma::kRows)) : warpRow0;
  Value active = e.lt(firstRow, e.mul(rows.numTokens, e.idx(shape.pack)));
  if (g.stages == 2)
    return walkDoubleBuffered(rows, walk, lo, hi, active);
  // Software pipeline with one K and one V buffer: V(t) loads while QK(t)
  // and the softmax run, K(t+1) while PV(t) runs.
  Value bn = e.idx(g.bn);
  auto validAt = [&](Value n0) { return e.min(bn, e.sub(hi, n0)); };
  e.ifThen(e.lt(lo, hi),
           [&] { stageKeys(walk, cur.k, lo, validAt(lo), true); });
  commitGroup();
  e.forLoop(lo, hi, bn, [&](Value n0) {
    pinLaneCoordinates();
    Value nValid = validAt(n0);
    stageValues(walk, cur, n0, nValid);
    waitGroups(commitGroup(), 1); // K(t) has landed
    Probabilities p = activeScores(rows, active, n0, nValid);
    gpu::BarrierOp::create(b); // every warp is done with K(t)
    Value next = e.add(n0, bn);
    e.ifThen(e.lt(next, hi),
             [&] { stageKeys(walk, cur.k, next, validAt(next), true); });
    waitGroups(commitGroup(), 1); // V(t) has landed
    e.ifThen(active, [&] { accumulate(p, walk.valueKeyMajor); });
    gpu::BarrierOp::create(b); // every warp is done with V(t)
    unpinLaneCoordinates();
  });
}

void WarpAttentionBuilder::walkDoubleBuffered(const ProgramRows &rows,
                                              const KvWalk &walk, Value lo,
                                              Value hi, Value active) {
  // Tile t computes from buffer t % 2 while K and V of tile t + 1 load into
  // the other; the barrier after each wait also tells that every warp is
  // done with the buffer about to be refilled.
  Value bn = e.idx(g.bn);
  auto validAt = [&](Value n0) { return e.min(bn, e.sub(hi, n0)); };
  auto stageTile = [&](const KvBuffers &buf, Value n0, Value nValid) {
    stageKeys(walk, buf.k, n0, nValid, true);
    stageValues(walk, buf, n0, nValid);
  };
  gpu::BarrierOp::create(b); // the previous range may still read buffer 0
  e.ifThen(e.lt(lo, hi),
           [&] { stageTile(kvBuffers(e.idx(0)), lo, validAt(lo)); });
  commitGroup();
  KvBuffers first = cur;
  e.forLoop(lo, hi, bn, [&](Value n0) {
    pinLaneCoordinates();
    Value parity = e.remU(e.divU(e.sub(n0, lo), bn), e.idx(2));
    waitGroups(commitGroup(), 0); // K(t) and V(t) have landed
    Value next = e.add(n0, bn);
    e.ifThen(e.lt(next, hi), [&] {
      KvBuffers buf = kvBuffers(e.sub(e.idx(1), parity));
      e.ifThenElse(
          e.le(e.add(next, bn), hi), [&] { stageTile(buf, next, Value()); },
          [&] { stageTile(buf, next, validAt(next)); });
    });
    commitGroup();
    cur = kvBuffers(parity);
    Value nValid = validAt(n0);
    // One straight-line body per case (no barrier inside a tile here), so
    // that the unmasked tiles carry no mask arithmetic at all.
    e.ifThen(active, [&] {
      auto tile = [&](bool masked) {
        if (g.wgmma)
          return warpgroupTile(rows, n0, nValid, masked, walk.valueKeyMajor);
        accumulate(scores(rows, n0, nValid, masked), walk.valueKeyMajor);
      };
      if (f.bias)
        return tile(true);
      e.ifThenElse(tileUnmasked(rows, n0, nValid), [&] { tile(false); },
                   [&] { tile(true); });
    });
    cur = first;
    unpinLaneCoordinates();
  });
}

WarpAttentionBuilder::Probabilities
WarpAttentionBuilder::activeScores(const ProgramRows &rows, Value active,
                                   Value n0, Value nValid) {
  int64_t numP = g.mFrags * g.nTiles() * 2, numAlpha = 2 * g.mFrags;
  Type pairType = ct.isF16() ? Type(VectorType::get({2}, ct)) : b.getI32Type();
  SmallVector<Type> types(numP, pairType);
  types.append(numAlpha, b.getF32Type());
  auto flat = [&](bool masked) {
    Probabilities p = scores(rows, n0, nValid, masked);
    SmallVector<Value> v = p.p;
    v.append(p.alpha);
    return v;
  };
  SmallVector<Value> v = e.ifElse(
      active, types,
      [&] {
        if (f.bias)
          return flat(true);
        return e.ifElse(tileUnmasked(rows, n0, nValid), types,
                        [&] { return flat(false); },
                        [&] { return flat(true); });
      },
      [&] {
        SmallVector<Value> v(numP, pack(e.f32(0.0), e.f32(0.0)));
        v.append(numAlpha, e.f32(1.0));
        return v;
      });
  Probabilities p;
  p.p.assign(v.begin(), v.begin() + numP);
  p.alpha.assign(v.begin() + numP, v.end());
  return p;
}

Value WarpAttentionBuilder::tileUnmasked(const ProgramRows &rows, Value n0,
                                         Value nValid) {
  return e.andI(e.eq(nValid, e.idx(g.bn)),
                math.tileFullyVisible(rows, n0, e.add(n0, e.idx(g.bn))));
}

WarpAttentionBuilder::Probabilities
WarpAttentionBuilder::scores(const ProgramRows &rows, Value n0, Value nValid,
                             bool masked) {
  // S = Q K^T: B operand tiles are 8 keys x 16 dims, read from K's rows;
  // each is read once per warp and used by all its M fragments.
  int64_t nTiles = g.nTiles(), kSteps = g.dPad / 16;
  Acc zero = {e.f32(0.0), e.f32(0.0), e.f32(0.0), e.f32(0.0)};
  SmallVector<Acc> s(g.mFrags * nTiles, zero); // [m * nTiles + j]
  Value lane8 = e.remU(lane, e.idx(8));
  // Q fragments are read one k step at a time when S and O already fill
  // the registers (two fragments of a wide S).
  bool pairs = !(g.registersFull() && qFrags.empty());
  // (wgmma: issued and waited for here. Issued before the next tile's
  // copies instead, the accumulators would be in flight across their
  // branches, and ptxas serializes the MMAs: C7518.)
  if (g.wgmma)
    s = awaitScores(issueWarpgroupScores(0, g.bn), 0);
  for (int64_t kk = 0; !g.wgmma && kk < kSteps; kk += pairs ? 2 : 1) {
    bool pair = pairs && kk + 1 < kSteps;
    SmallVector<SmallVector<Value>> qa[2];
    for (int64_t m = 0; m < g.mFrags; ++m) {
      qa[0].push_back(queryFragment(m, kk));
      if (pair)
        qa[1].push_back(queryFragment(m, kk + 1));
    }
    for (int64_t j = 0; j < nTiles; ++j) {
      Value row = e.add(e.idx(8 * j), lane8);
      Value laneCol = pair ? e.mul(e.divU(lane, e.idx(8)), e.idx(8))
                           : e.mul(e.remU(e.divU(lane, e.idx(8)), e.idx(2)),
                                   e.idx(8));
      SmallVector<Value> kb =
          ldmatrix(cur.k.mem, row, e.add(e.idx(kk * 16), laneCol),
                   pair ? 4 : 2, false);
      for (int64_t m = 0; m < g.mFrags; ++m) {
        Acc &acc = s[m * nTiles + j];
        acc = mma(qa[0][m], {kb[0], kb[1]}, acc);
        if (pair)
          acc = mma(qa[1][m], {kb[2], kb[3]}, acc);
      }
    }
  }

  return softmax(rows, n0, nValid, masked, s, 0);
}

WarpAttentionBuilder::Probabilities
WarpAttentionBuilder::softmax(const ProgramRows &rows, Value n0, Value nValid,
                              bool masked, ArrayRef<Acc> s,
                              int64_t firstTile) {
  int64_t nTiles = s.size() / g.mFrags;
  SmallVector<Value> p =
      modifiedScores(rows, n0, nValid, s, masked, firstTile);

  // Online softmax on the fragments: rows quadRow (h = 0) and quadRow + 8
  // of each M fragment. Each phase runs over all of the thread's rows
  // before the next, so the shuffles and exp2s of independent rows overlap.
  int64_t numRows = 2 * g.mFrags;
  auto rowElems = [&](int64_t st) {
    SmallVector<Value *> xs;
    int64_t m = st / 2, h = st % 2;
    for (int64_t j = 0; j < nTiles; ++j)
      for (int64_t i = 2 * h; i < 2 * h + 2; ++i)
        xs.push_back(&p[pIndex(m, j, i, nTiles)]);
    return xs;
  };
  SmallVector<Value> mx(numRows);
  for (int64_t st = 0; st < numRows; ++st) {
    SmallVector<Value> xs;
    for (Value *x : rowElems(st))
      xs.push_back(*x);
    mx[st] = treeReduce(xs, /*isMax=*/true);
  }
  quadReduce(mx, /*isMax=*/true);
  Probabilities probs;
  probs.alpha.resize(numRows);
  // The reference max of a row moves only when the tile's max exceeds it by
  // more than kRescaleSlack (log2 units): P stays below 2^kRescaleSlack, and
  // O and l, both relative to the reference, need no rescaling on most
  // tiles. (Not with an fp8 P, whose quantization expects P <= 1, nor where
  // the registers are full: the conditional rescaling spills there.)
  constexpr float kRescaleSlack = 8.0f;
  bool lazy = !f.pScale && !g.registersFull();
  SmallVector<Value> negMax(numRows);
  Value grownAny = e.boolean(false);
  for (int64_t st = 0; st < numRows; ++st) {
    Value tileMax = foldedFactor ? e.mulF(mx[st], foldedFactor) : mx[st];
    Value mOld = e.load(mState, {e.idx(st)});
    Value mNew = e.maxF(mOld, tileMax);
    Value grown;
    if (lazy) {
      grown = e.cmpF(arith::CmpFPredicate::OGT, tileMax,
                     e.addF(mOld, e.f32(kRescaleSlack)));
      mNew = e.select(grown, mNew, mOld);
      grownAny = e.orI(grownAny, grown);
    }
    Value mSafe = math.safeMax(mNew);
    probs.alpha[st] = e.exp2(e.subF(mOld, mSafe));
    if (lazy)
      probs.alpha[st] = e.select(grown, probs.alpha[st], e.f32(1.0));
    negMax[st] = e.subF(e.f32(0.0), mSafe);
    e.store(mNew, mState, {e.idx(st)});
  }
  if (lazy) {
    // Warp-uniform: whether any row of the warp has a new reference.
    Value all = arith::ConstantOp::create(b, b.getI32IntegerAttr(-1));
    probs.rescale = NVVM::VoteSyncOp::create(b, b.getI1Type(), all, grownAny,
                                             NVVM::VoteSyncKind::any);
  }
  SmallVector<Value> sums(numRows);
  for (int64_t st = 0; st < numRows; ++st) {
    SmallVector<Value> terms;
    for (Value *x : rowElems(st)) {
      // exp2(factor * dot - max) is one FMA when the factor is folded.
      // (llvm.intr.fma: math.fma would become a libdevice call).
      *x = e.exp2(foldedFactor
                      ? LLVM::FMAOp::create(b, *x, foldedFactor, negMax[st])
                      : e.addF(*x, negMax[st]));
      terms.push_back(*x);
    }
    sums[st] = treeReduce(terms, /*isMax=*/false);
  }
  for (int64_t st = 0; st < numRows; ++st) {
    Value l = e.load(lState, {e.idx(st)});
    e.store(e.addF(e.mulF(l, probs.alpha[st]), sums[st]), lState,
            {e.idx(st)});
  }
  if (f.dropoutP || f.pScale) {
    for (int64_t m = 0; m < g.mFrags; ++m)
      for (int64_t j = 0; j < nTiles; ++j)
        for (int64_t i = 0; i < 4; ++i) {
          Value &x = p[pIndex(m, j, i, nTiles)];
          x = math.probability(rows, rowOf(m, i / 2),
                               e.add(n0, colOf(firstTile + j, i)), x);
        }
  }
  // P as PV's A operand, packed to the compute type right away: half the
  // registers while the next K tile is staged.
  for (int64_t m = 0; m < g.mFrags; ++m)
    for (int64_t j = 0; j < nTiles; ++j)
      for (int64_t h = 0; h < 2; ++h)
        probs.p.push_back(
            pack(p[pIndex(m, j, 2 * h, nTiles)],
                 p[pIndex(m, j, 2 * h + 1, nTiles)]));
  return probs;
}

SmallVector<Value> WarpAttentionBuilder::modifiedScores(
    const ProgramRows &rows, Value n0, Value nValid, ArrayRef<Acc> s,
    bool masked, int64_t firstTile) {
  SmallVector<Value> out(s.size() * 4);
  int64_t nTiles = s.size() / g.mFrags;
  for (int64_t m = 0; m < g.mFrags; ++m) {
    for (int64_t j = 0; j < nTiles; ++j) {
      for (int64_t i = 0; i < 4; ++i) {
        Value dot = s[m * nTiles + j][i];
        Value row = rowOf(m, i / 2), col = colOf(firstTile + j, i);
        Value key = e.add(n0, col);
        Value &x = out[pIndex(m, j, i, nTiles)];
        Value scored = foldedFactor ? dot : math.score(rows, row, key, dot);
        if (!masked) {
          x = scored;
          continue;
        }
        Value ok = e.andI(e.lt(col, nValid), math.visible(rows, row, key));
        if (f.bias) {
          x = e.ifElse(ok, {b.getF32Type()},
                       [&] {
                         return SmallVector<Value>{
                             math.score(rows, row, key, dot)};
                       },
                       [&] { return SmallVector<Value>{e.negInf()}; })[0];
        } else {
          x = e.select(ok, scored, e.negInf());
        }
      }
    }
  }
  return out;
}

void WarpAttentionBuilder::rescaleOutput(const Probabilities &probs) {
  auto rescale = [&] {
    for (int64_t m = 0; m < g.mFrags; ++m)
      for (int64_t dj = 0; dj < g.dTiles(); ++dj)
        for (int64_t i = 0; i < 4; ++i)
          e.store(e.mulF(e.load(oAcc, {accIndex(m, dj, i)}),
                         probs.alpha[stateIndex(m, i / 2)]),
                  oAcc, {accIndex(m, dj, i)});
  };
  if (probs.rescale)
    e.ifThen(probs.rescale, rescale);
  else
    rescale();
}

void WarpAttentionBuilder::accumulate(const Probabilities &probs,
                                      bool vTransposed) {
  // O = alpha * O + P V. Each B operand tile (16 keys x 8 dims of V) is
  // read once per warp for all its M fragments: with ldmatrix.trans from a
  // [bn, D] tile, or plainly from a transposed [D, bn] one.
  if (g.wgmma)
    return storeWarpgroupOutput(issueWarpgroupPV(probs, vTransposed, 0));
  int64_t dTiles = g.dTiles(), kSteps = g.bn / 16;
  rescaleOutput(probs);
  SmallVector<Acc> acc(g.mFrags * dTiles); // [m * dTiles + dj]
  for (int64_t m = 0; m < g.mFrags; ++m)
    for (int64_t dj = 0; dj < dTiles; ++dj)
      for (int64_t i = 0; i < 4; ++i)
        acc[m * dTiles + dj][i] = e.load(oAcc, {accIndex(m, dj, i)});
  // P of key step kk for fragment m: A operand of mma.
  auto pOperand = [&](int64_t m, int64_t kk) {
    auto pv = [&](int64_t j, int64_t h) {
      return probs.p[(m * g.nTiles() + j) * 2 + h];
    };
    return SmallVector<Value>{pv(2 * kk, 0), pv(2 * kk, 1), pv(2 * kk + 1, 0),
                              pv(2 * kk + 1, 1)};
  };
  Value lane8 = e.remU(lane, e.idx(8));
  if (vTransposed) {
    // x4: dims 8dj.. x keys (16kk .. +8 | +8 .. +16 | 16(kk+1) ..): the B
    // operands of key steps kk and kk + 1 for one 8-dim tile.
    for (int64_t kk = 0; kk < kSteps; kk += 2) {
      bool pair = kk + 1 < kSteps;
      SmallVector<SmallVector<Value>> a0, a1;
      for (int64_t m = 0; m < g.mFrags; ++m) {
        a0.push_back(pOperand(m, kk));
        if (pair)
          a1.push_back(pOperand(m, kk + 1));
      }
      Value laneCol = pair ? e.mul(e.divU(lane, e.idx(8)), e.idx(8))
                           : e.mul(e.remU(e.divU(lane, e.idx(8)), e.idx(2)),
                                   e.idx(8));
      for (int64_t dj = 0; dj < dTiles; ++dj) {
        SmallVector<Value> vb =
            ldmatrix(cur.vt.mem, e.add(e.idx(8 * dj), lane8),
                     e.add(e.idx(kk * 16), laneCol), pair ? 4 : 2, false);
        for (int64_t m = 0; m < g.mFrags; ++m) {
          Acc &c = acc[m * dTiles + dj];
          c = mma(a0[m], {vb[0], vb[1]}, c);
          if (pair)
            c = mma(a1[m], {vb[2], vb[3]}, c);
        }
      }
    }
  } else {
    Value vRowInTile = e.add(
        lane8, e.mul(e.remU(e.divU(lane, e.idx(8)), e.idx(2)), e.idx(8)));
    Value vColInTile = e.mul(e.divU(lane, e.idx(16)), e.idx(8));
    for (int64_t kk = 0; kk < kSteps; ++kk) {
      SmallVector<SmallVector<Value>> a;
      for (int64_t m = 0; m < g.mFrags; ++m)
        a.push_back(pOperand(m, kk));
      Value row = e.add(e.idx(kk * 16), vRowInTile);
      for (int64_t dp = 0; dp < g.dPad / 16; ++dp) {
        Value col = e.add(e.idx(dp * 16), vColInTile);
        SmallVector<Value> vb =
            ldmatrix(cur.v.mem, row, col, 4, /*transpose=*/true);
        for (int64_t m = 0; m < g.mFrags; ++m) {
          Acc &lo = acc[m * dTiles + 2 * dp];
          Acc &hi = acc[m * dTiles + 2 * dp + 1];
          lo = mma(a[m], {vb[0], vb[1]}, lo);
          hi = mma(a[m], {vb[2], vb[3]}, hi);
        }
      }
    }
  }
  for (int64_t m = 0; m < g.mFrags; ++m)
    for (int64_t dj = 0; dj < dTiles; ++dj)
      for (int64_t i = 0; i < 4; ++i)
        e.store(acc[m * dTiles + dj][i], oAcc, {accIndex(m, dj, i)});
}

SmallVector<Value>
WarpAttentionBuilder::issueWarpgroupScores(int64_t keyFirst, int64_t keys) {
  // A = rows [64 wg, 64 wg + 64) of Q, B = keys [keyFirst, keyFirst + keys)
  // of the K tile, both K-major: k step kk is 32 bytes into atom kk / 4.
  using namespace wgmma;
  Value groupRows = e.mul(e.divU(warp, e.idx(4)), e.idx(kRows * kAtomRowBytes));
  SmallVector<Value> acc;
  fence(b);
  for (int64_t kk = 0; kk < g.dPad / 16; ++kk) {
    int64_t atom = kk / 4, within = kk % 4 * 32;
    Value a = descriptor(
        b,
        e.add(tileAddress(qS, atom * g.mRows * kAtomRowBytes + within),
              groupRows),
        16, kGroupBytes);
    Value bDesc = descriptor(
        b,
        tileAddress(cur.k, (atom * g.bn + keyFirst) * kAtomRowBytes + within),
        16, kGroupBytes);
    acc = wgmma::mma(b, keys, ct, a, {}, bDesc, /*transB=*/false, acc);
  }
  commit(b);
  return acc;
}

SmallVector<WarpAttentionBuilder::Acc>
WarpAttentionBuilder::awaitScores(ArrayRef<Value> pending, int laterGroups) {
  // The accumulators of m64nNk16 are, per warp, those of N / 8 mma.sync
  // m16n8 tiles in order.
  wgmma::wait(b, laterGroups);
  SmallVector<Value> acc = wgmma::fenceOperands(b, pending);
  SmallVector<Acc> s(acc.size() / 4);
  for (size_t j = 0; j < s.size(); ++j)
    for (int64_t i = 0; i < 4; ++i)
      s[j][i] = acc[4 * j + i];
  return s;
}

SmallVector<Value>
WarpAttentionBuilder::issueWarpgroupPV(const Probabilities &probs,
                                       bool vTransposed, int64_t kFirst) {
  // A = P (registers, mma.sync's A layout: key step kk is S tiles 2kk and
  // 2kk + 1). B = V: a [bn, D] tile is N-major (D contiguous), its atoms of
  // 64 dims bn * 128 bytes apart and k step kk 16 rows on; a transposed
  // [D, bn] tile is K-major like K.
  using namespace wgmma;
  rescaleOutput(probs);
  SmallVector<Value> acc;
  for (int64_t dj = 0; dj < g.dTiles(); ++dj)
    for (int64_t i = 0; i < 4; ++i)
      acc.push_back(e.load(oAcc, {accIndex(0, dj, i)}));
  fence(b);
  for (int64_t k = 0; k < static_cast<int64_t>(probs.p.size()) / 4; ++k) {
    int64_t kk = kFirst + k;
    SmallVector<Value> p(probs.p.begin() + 4 * k, probs.p.begin() + 4 * k + 4);
    Value v =
        vTransposed
            ? descriptor(b,
                         tileAddress(cur.vt, kk / 4 * g.dPad * kAtomRowBytes +
                                                 kk % 4 * 32),
                         16, kGroupBytes)
            : descriptor(b, tileAddress(cur.v, kk * 16 * kAtomRowBytes),
                         g.bn * kAtomRowBytes, kGroupBytes);
    acc = wgmma::mma(b, g.dPad, ct, Value(), p, v, /*transB=*/!vTransposed,
                     acc);
  }
  commit(b);
  return acc;
}

void WarpAttentionBuilder::storeWarpgroupOutput(ArrayRef<Value> pending) {
  wgmma::wait(b, 0);
  SmallVector<Value> acc = wgmma::fenceOperands(b, pending);
  for (int64_t dj = 0; dj < g.dTiles(); ++dj)
    for (int64_t i = 0; i < 4; ++i)
      e.store(acc[4 * dj + i], oAcc, {accIndex(0, dj, i)});
}

void WarpAttentionBuilder::warpgroupTile(const ProgramRows &rows, Value n0,
                                         Value nValid, bool masked,
                                         bool vTransposed) {
  // The tile as two halves of keys, each a step of the online softmax:
  // QK of both halves is issued at once, the softmax of the first half
  // runs under QK of the second, and that of the second under PV of the
  // first. Between an MMA group's issue and its wait the code is
  // straight-line (ptxas serializes MMAs whose registers are in flight
  // across branches: C7518), so the bias path, whose reads branch, runs
  // the tile whole. So do large heads on 64-key tiles: QK of 32-key halves
  // (m64n32) over 256 dims measured slower than the whole tile (H200).
  int64_t half = g.bn / 2;
  if (f.bias || half % 32 || (half < 64 && g.dPad > 64)) {
    Probabilities probs = softmax(
        rows, n0, nValid, masked, awaitScores(issueWarpgroupScores(0, g.bn), 0),
        0);
    return storeWarpgroupOutput(issueWarpgroupPV(probs, vTransposed, 0));
  }
  SmallVector<Value> first = issueWarpgroupScores(0, half);
  SmallVector<Value> second = issueWarpgroupScores(half, half);
  Probabilities pFirst =
      softmax(rows, n0, nValid, masked, awaitScores(first, 1), 0);
  SmallVector<Acc> sSecond = awaitScores(second, 0);
  SmallVector<Value> o = issueWarpgroupPV(pFirst, vTransposed, 0);
  Probabilities pSecond = softmax(rows, n0, nValid, masked, sSecond, half / 8);
  storeWarpgroupOutput(o);
  storeWarpgroupOutput(issueWarpgroupPV(pSecond, vTransposed, half / 16));
}

void WarpAttentionBuilder::epilogue(const ProgramRows &rows) {
  for (int64_t m = 0; m < g.mFrags; ++m) {
    for (int64_t h = 0; h < 2; ++h) {
      Value st = e.idx(stateIndex(m, h));
      // Shuffles first: every lane of the warp takes part.
      Value l = quadReduce(e.load(lState, {st}), /*isMax=*/false);
      Value row = rowOf(m, h);
      Value tok = math.tokenOf(row);
      e.ifThen(e.lt(tok, rows.numTokens), [&] {
        Value qRow = e.add(rows.qTokBase, tok);
        Value head = math.headOf(rows, row);
        Value factor;
        if (o.segmentMax) {
          e.ifThen(e.eq(quadCol, e.idx(0)), [&] {
            Value mx = e.load(mState, {st});
            e.store(e.mulF(mx, e.f32(kLn2)), o.segmentMax,
                    {qRow, head, rows.segment});
            e.store(l, o.segmentSum, {qRow, head, rows.segment});
          });
        } else {
          factor = math.outputFactor(l, o.outScale);
        }
        for (int64_t dj = 0; dj < g.dTiles(); ++dj) {
          for (int64_t i = 2 * h; i < 2 * h + 2; ++i) {
            Value d = colOf(dj, i);
            Value v = e.load(oAcc, {accIndex(m, dj, i)});
            auto store = [&] {
              if (o.segmentMax)
                e.store(v, o.out, {qRow, head, rows.segment, d});
              else
                e.storeFrom32(e.mulF(v, factor), o.out, {qRow, head, d});
            };
            if (8 * dj + 8 > shape.headDim)
              e.ifThen(e.lt(d, e.idx(shape.headDim)), store);
            else
              store();
          }
        }
      });
    }
  }
}

} // namespace

FailureOr<Type> mlir::attn::warpComputeType(Type qType) {
  if (qType.isF16() || qType.isBF16())
    return qType;
  if (isa<Float8E4M3FNType, Float8E5M2Type>(qType))
    return Float16Type::get(qType.getContext());
  return failure();
}

WarpLaunch mlir::attn::warpLaunchFor(const TileShape &shape, Type ct,
                                     bool hopper) {
  Geometry g = geometryOf(shape, hopper);
  int64_t bytes = (g.mRows * g.stride + g.stages * g.kvElems()) *
                  ct.getIntOrFloatBitWidth() / 8;
  if (g.wgmma)
    bytes += kAlignSlack;
  return {g.warps * kLanes, bytes, g.wgmma};
}

void WarpProgramTarget::grid(LoopEmitter &e, ArrayRef<Value> ubs,
                             llvm::function_ref<void(ValueRange)> body) {
  // The launch grid is exactly `ubs` (the host computes the same extents).
  ImplicitLocOpBuilder &b = e.builder();
  SmallVector<Value> ids;
  gpu::Dimension dims[] = {gpu::Dimension::x, gpu::Dimension::y,
                           gpu::Dimension::z};
  for (size_t i = 0; i < ubs.size(); ++i)
    ids.push_back(gpu::BlockIdOp::create(b, dims[i]));
  // Blocks start in x order: walking the query tiles backwards starts the
  // longest causal programs (the last tiles of each sequence) first, so the
  // short ones fill the tail.
  ids[0] = arith::SubIOp::create(
      b, arith::SubIOp::create(b, ubs[0],
                               arith::ConstantIndexOp::create(b, 1)),
      ids[0]);
  body(ids);
}

void WarpProgramTarget::emitProgram(LoopEmitter &e, const TileShape &shape,
                                    const AttentionFeatures &f,
                                    const AttentionOutput &o, Value q,
                                    const ProgramRows &rows,
                                    ArrayRef<KvWalk> walks) {
  WarpAttentionBuilder(e, shape, f, o, q, entry, shared, computeType, threads,
                       hopper)
      .emit(rows, walks);
}

void WarpProgramTarget::spread(LoopEmitter &e, Value lo, Value hi,
                               llvm::function_ref<void(Value)> body) {
  Value tid = gpu::ThreadIdOp::create(e.builder(), gpu::Dimension::x);
  e.forLoop(e.add(lo, tid), hi, e.idx(threads), body);
}

//===- TiledAttention.h - the target-independent attention program -*- C++ -*-//
//
// One program of the tiled attention grid: an M tile of query rows (block_q
// tokens x heads_per_program heads of one KV head), walked over KV tiles with
// the online-softmax update, then the epilogue. Every attn kernel op lowers
// through this builder; the ops differ only in how they lay out the grid,
// which rows a program owns and where its keys come from (its KV walks).
// The math is docs/semantics.md, section 2.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_CONVERSION_ATTNTOSCF_TILEDATTENTION_H
#define ATTN_CONVERSION_ATTNTOSCF_TILEDATTENTION_H

#include "attn/Conversion/AttnToSCF/LoopEmitter.h"
#include "attn/IR/AttnAttrs.h"

#include <functional>
#include <optional>

namespace mlir::attn {

/// Static shape of a program's tiles.
struct TileShape {
  int64_t blockQ; // query tokens per program
  int64_t blockN; // keys per KV tile
  int64_t pack;   // query heads per program (all of one KV head)
  int64_t headDim;
  int64_t warps = 0; // GPU row slabs (ScheduleAttr::warps; 0: one per 16)
  // The KV pipeline (ScheduleAttr: tma, producer_warps, pingpong,
  // persistent).
  bool tma = false;
  int64_t producerWarps = 0;
  bool pingpong = false;
  bool persistent = false;
  int64_t stages = 0; // K/V buffers (ScheduleAttr::stages; 0: the target's)
  int64_t rows() const { return blockQ * pack; }
};

/// Score modifiers, masks and output handling of one op (values are null
/// when the feature is off).
struct AttentionFeatures {
  Value scale;       // f32 softmax scale
  Value softcap;     // f32
  Value alibiSlopes; // [q_heads] f32
  AlibiForm alibiForm = AlibiForm::relative;
  Value sinks; // [q_heads] f32
  std::optional<int64_t> window;
  bool causal = false;
  /// Unified: per-sequence causal flags [batch] i8 (0: bidirectional).
  /// Bidirectional rows bound a window on both sides.
  Value causalFlags;
  /// Chunked attention (replaces the window): key k is visible to position
  /// p when p / chunkSize - k / chunkSize <= chunkLookback.
  std::optional<int64_t> chunkSize, chunkLookback;
  Value bias;                 // [1|batch, q_heads, max_q, max_k]
  Value qqBias;               // unified tree bias [rows, cols]
  Value mmPrefixRange;        // unified bidirectional ranges [batch, R, 2]
  bool mmClampWindow = false; // the ranges also obey the window
  Value rswaPrefixLens;       // unified R-SWA prompt lengths [batch]
  std::optional<int64_t> rswaWindow;
  Value dropoutP, philoxSeed, philoxOffset;
  Value pScale; // flash fp8: P is quantized to pQuantType
  Type pQuantType;
  int64_t numQueryHeads = 0; // for the dropout counter
};

/// Where a program's results go.
struct AttentionOutput {
  Value out;                    // [tokens, q_heads, D] or split [.., S, D]
  Value outScale;               // fp8 out
  Value segmentMax, segmentSum; // split-KV form
  Value lse;                    // row log-sum-exp [tokens, q_heads] f32
};

/// Run-time description of one program's rows. Row r of the M tile is token
/// `r / pack` of the tile and query head `headBase + r % pack`.
struct ProgramRows {
  Value qTokBase;   // row of q/out of the tile's first token
  Value numTokens;  // valid tokens in this tile (<= blockQ)
  Value qposBase;   // position of the first token (for masks and ALiBi)
  Value seqRowBase; // index of the first token within its sequence
  Value headBase;   // first query head
  Value ctx;        // keys before the sequence's first query (ALiBi context)
  Value batch;      // sequence index (bias, dropout)
  Value lenQ, lenK; // sequence lengths (bias, dropout)
  Value segment;    // split-KV segment index (split form only)
  // Row of the split form's partials for the tile's first token: qTokBase,
  // unless set (attn.unified's sequence_partials: b * R + seqRowBase).
  Value partialRowBase;
  Value qScale;   // dequantization scale of q (fp8 q only)
  Type qQuantize; // fp8 type q is quantized to on load (LoopEmitter::load32)

  Value partialBase() const {
    return partialRowBase ? partialRowBase : qTokBase;
  }
};

/// Where one key's K and V rows live: element d of K is
/// `k[kAt(d)] * kScale`, of V `v[vAt(d)] * vScale` (scales may be null).
/// `kChunks`/`vChunks`: elements d0 .. d0 + 7 (d0 a multiple of 8) are
/// adjacent in the index space with d0's indices first, so they may be read
/// as one vector when the memref's innermost stride is 1.
struct KeyRow {
  Value k, v;
  std::function<SmallVector<Value>(Value d)> kAt, vAt;
  Value kScale, vScale;
  bool kChunks = false, vChunks = false;
  /// fp8 type K and V are quantized to on load with their scales (as
  /// LoopEmitter::load32), or null.
  Type quantize;
};
using KeyLocator = std::function<KeyRow(LoopEmitter &, Value key)>;

/// One slot of a block-sparse union walk (KvWalk::forEachBlockTile): the
/// `valid` keys from `first` (0 to a block's size, cut at the walk's end;
/// 0 for an empty slot, whose `first` repeats a listed block's so that it
/// addresses real rows) and which of the program's two layout rows list it.
struct SparseBlock {
  Value first, valid;            // index
  Value inFirstRow, inSecondRow; // i1
};

/// A range of key positions [lo, hi) and where its keys live. A walk may
/// also enumerate its own sub-ranges (CSR blocks) through `forEachRange`.
struct KvWalk {
  Value lo, hi;
  KeyLocator locate;
  /// V is key-major ([.., D, page] caches): element d of keys k .. k + 7
  /// (k a multiple of 8) are adjacent, key k's indices first, and the walk's
  /// ranges start at multiples of 8. GPU programs then stage V transposed
  /// with 16-byte copies.
  bool valueKeyMajor = false;
  /// Keys of one run of a key-major V (its pages' size; 0: not said). A
  /// program may round the walk's start down further (the keys before it
  /// are masked) so that its tiles start on whole runs.
  int64_t valueRun = 0;
  /// Keys are located through a block table (each staged row reads it).
  bool paged = false;
  /// K is vLLM's split-x cache ([.., D / x, page, x]): x dims of a key are
  /// adjacent, and a chunk of them is adjacent to the next key's. Gathering
  /// GPU programs keep that layout in shared memory (core matrices).
  bool splitKeys = false;
  /// The NHD caches ([blocks, page, kv_heads, D]) of a paged walk whose
  /// KeyRow indices are {block, slot, kv head, d}: programs may load whole
  /// pages of them as boxes (TMA). Null otherwise.
  Value pagedK, pagedV;
  /// The element type of K and its dequantization scale (null for none),
  /// the same for every key of the walk (as KeyRow's kScale): programs that
  /// multiply stored fp8 values directly apply the scale to the dot product.
  Type keyType;
  Value keyScale;
  /// Dense walks (key n is row denseBase + n, head denseHead, of the
  /// [tokens, kv_heads, D] memrefs denseK / denseV, stored as they are):
  /// what a program needs to address whole tiles at once (TMA). Null
  /// otherwise. A program that does applies keyScale and the KeyRow's
  /// vScale (fp8 K/V) itself.
  Value denseK, denseV, denseBase, denseHead;
  /// When set, the walk visits the ranges this enumerates (each already
  /// clipped to [lo, hi)) instead of [lo, hi) itself.
  std::function<void(LoopEmitter &,
                     llvm::function_ref<void(Value, Value)> visit)>
      forEachRange;
  /// Block-sparse programs over two layout rows (block_q twice the query
  /// block; docs/semantics.md, 3.4): the union of both rows' CSR blocks,
  /// ascending, `perTile` slots a visit (visit(i, slots) for i = 0, 1, ..;
  /// the last visit's slots may end empty); returns the number of visits.
  /// Rows of tokens before `secondRowToken` are the first layout row's and
  /// see only the blocks it lists. Such a walk has no forEachRange.
  std::function<Value(
      LoopEmitter &, int64_t perTile,
      llvm::function_ref<void(Value, ArrayRef<SparseBlock>)> visit)>
      forEachBlockTile;
  Value secondRowToken;

  /// Calls `visit(lo, hi)` for each range the walk covers.
  /// (Not for union walks, whose rows differ in what they see: callers
  /// walk forEachBlockTile.)
  void visitRanges(LoopEmitter &e,
                   llvm::function_ref<void(Value, Value)> visit) const {
    assert(!forEachBlockTile && "a union walk has no ranges");
    if (forEachRange)
      forEachRange(e, visit);
    else
      visit(lo, hi);
  }
};

/// The element-level semantics every target shares (docs/semantics.md,
/// section 2): which keys a row sees, its score in the log2 domain, the
/// dropout decision, the initial softmax state and the epilogue factor.
/// Program builders (CPU loops, GPU warps) only decide where these values
/// live.
class AttentionMath {
public:
  AttentionMath(LoopEmitter &e, TileShape shape, AttentionFeatures features)
      : e(e), shape(shape), f(std::move(features)) {}

  /// The key positions [lo, hi) that any row of the program can see under
  /// the causal and window masks; walks intersect their ranges with it, so
  /// fully masked tiles are never visited.
  std::pair<Value, Value> visibleKeyRange(const ProgramRows &rows);
  /// Whether every valid row of the program sees every key position of
  /// [n0, n1) under the causal and window masks: such tiles need no
  /// per-element mask.
  Value tileFullyVisible(const ProgramRows &rows, Value n0, Value n1);
  /// Whether row `row` sees key position `key` (token valid, masks).
  Value visible(const ProgramRows &rows, Value row, Value key);
  /// Whether visible() is one interval of key positions for every row (the
  /// causal and window masks alone: no chunks, R-SWA, bidirectional ranges
  /// or per-sequence flags), so that visibleColumns applies.
  bool intervalMasks() const {
    return !f.chunkSize && !f.rswaPrefixLens && !f.mmPrefixRange &&
           !f.causalFlags;
  }
  /// Under intervalMasks(): row `row` sees the key at column c of the tile
  /// at n0 (key n0 + c, 0 <= c) iff c < nValid and visible(), which is iff
  /// (c - lo) < span as unsigned i32 numbers, {lo, span} the returned pair
  /// of i32 values (span 0 for an invalid row). A kernel then masks each
  /// element with one subtraction and one compare in 32 bits.
  std::pair<Value, Value> visibleColumns(const ProgramRows &rows, Value row,
                                         Value n0, Value nValid);
  /// Whether the score is `dot` times linearScoreFactor() (no softcap,
  /// ALiBi or bias), so that a kernel may compare raw dot products and
  /// scale them later.
  bool linearScores() const {
    return !f.softcap && !f.alibiSlopes && !f.bias && !f.qqBias;
  }
  Value linearScoreFactor();
  /// log2(e) * (modified score) of `dot` = q . k. `alibiDistance`, if
  /// given, is key - alibiReference(rows, row) as an i32 (a kernel may add
  /// it up per element in 32 bits).
  Value score(const ProgramRows &rows, Value row, Value key, Value dot,
              Value alibiDistance = {});
  /// Whether ALiBi's distance is key - alibiReference() (every form but
  /// sqrt's).
  bool alibiByDistance() const {
    return f.alibiSlopes && f.alibiForm != AlibiForm::sqrt;
  }
  /// The position ALiBi measures a key's distance from, under
  /// alibiByDistance(); null otherwise.
  Value alibiReference(const ProgramRows &rows, Value row);
  /// Whether dropout keeps P[row, key] (only with a dropout probability).
  Value dropoutKeep(const ProgramRows &rows, Value row, Value key);
  /// P as the PV product sees it: dropout, then the fp8 P quantization.
  Value probability(const ProgramRows &rows, Value row, Value key, Value p);
  /// The running max and sum a row starts with (a sink is a virtual key).
  std::pair<Value, Value> initialState(const ProgramRows &rows, Value row);
  /// max with -inf replaced by 0, so that exp2(-inf - max) is 0, not NaN.
  Value safeMax(Value m);
  /// The factor that turns the accumulator of a row with sum `l` into the
  /// output (0 for a row that saw nothing; dropout and fp8 out scaling).
  Value outputFactor(Value l, Value outScale);

  Value tokenOf(Value row) { return e.divU(row, e.idx(shape.pack)); }
  Value headOf(const ProgramRows &rows, Value row) {
    return e.add(rows.headBase, e.remU(row, e.idx(shape.pack)));
  }
  const AttentionFeatures &features() const { return f; }

private:
  LoopEmitter &e;
  TileShape shape;
  AttentionFeatures f;
};

/// How a target emits the grid and the programs; the op lowerings
/// (LowerKernelOps.cpp) are written once against this.
class ProgramTarget {
public:
  virtual ~ProgramTarget() = default;
  /// Runs `body` once per grid point of [0, ubs[i]). `kvBytesPerSequence`
  /// (null where unknown): the K and V bytes one head group of an average
  /// sequence holds, which a target may weigh in ordering the programs.
  virtual void grid(LoopEmitter &e, ArrayRef<Value> ubs,
                    llvm::function_ref<void(ValueRange)> body,
                    Value kvBytesPerSequence) = 0;
  /// Emits one program: the query tile, the walks, the epilogue.
  virtual void emitProgram(LoopEmitter &e, const TileShape &shape,
                           const AttentionFeatures &f, const AttentionOutput &o,
                           Value q, const ProgramRows &rows,
                           ArrayRef<KvWalk> walks) = 0;
  /// Runs `body` for every i in [lo, hi), spread over the program's threads
  /// (element-wise work outside attention programs: merge_states).
  virtual void spread(LoopEmitter &e, Value lo, Value hi,
                      llvm::function_ref<void(Value)> body) = 0;
  /// Whether programs of block-sparse `op` under `shape` walk one layout
  /// row's blocks two a KV tile (KvWalk::forEachBlockTile, with no second
  /// row) instead of a range each; programs over two layout rows always
  /// do. (GPU pipelines that load a tile as two blocks.)
  virtual bool pairsBlocks(Operation *op, const TileShape &shape) const {
    return false;
  }
  /// The fused merge of split-KV programs (attn.unified with merged_out):
  /// counts this program's arrival at `counters[at]` (i32) and returns
  /// whether it was the `expected`-th, i.e. the last (whose counter is then
  /// reset to 0), as one i1 for all of the program's threads. Called by
  /// every thread after the program's stores; the last program then sees
  /// the stores of every program counted before it. (CPU: an atomic add.)
  virtual Value lastArrival(LoopEmitter &e, Value counters, ValueRange at,
                            Value expected);
  /// Whether the fused merge of programs of `shape` reads its whole rounds
  /// of segments (all of them there) through a second copy of the round
  /// that addresses each segment at a constant offset from the round's
  /// first, without the last round's clamps: fewer instructions, more
  /// loads in flight (and registers). The result is the same.
  virtual bool wholeMergeRounds(const TileShape &shape) const { return true; }
  /// The largest i in [0, n) with key(i) <= x, for a non-decreasing `key`
  /// with key(0) <= x (0 when n <= 1): where a program finds its sequence.
  /// A binary search unless the target searches faster.
  virtual Value searchLast(LoopEmitter &e, Value n, Value x,
                           llvm::function_ref<Value(LoopEmitter &, Value)> key);

protected:
  /// The search loop of searchLast: [lo, hi) = [0, n) holds the answer and
  /// `narrow` returns a smaller such range until one index is left.
  static Value searchLoop(
      LoopEmitter &e, Value n,
      llvm::function_ref<std::pair<Value, Value>(LoopEmitter &, Value, Value)>
          narrow);
};

/// The CPU program: scalar loops over f32 tiles in heap buffers.
class TiledAttentionBuilder {
public:
  TiledAttentionBuilder(LoopEmitter &e, TileShape shape,
                        AttentionFeatures features, AttentionOutput output,
                        Value q)
      : e(e), shape(shape), math(e, shape, features), o(std::move(output)),
        q(q) {}

  /// Emits the program: load the query tile, walk every KV range tile by
  /// tile, then write the epilogue.
  void emitProgram(const ProgramRows &rows, ArrayRef<KvWalk> walks);

private:
  void loadQueries(const ProgramRows &rows);
  void initState(const ProgramRows &rows);
  /// `listed(row)`, where given, further masks the rows (union walks).
  using RowMask = llvm::function_ref<Value(Value row)>;
  void walkRange(const ProgramRows &rows, const KvWalk &walk, Value lo,
                 Value hi, RowMask listed = nullptr);
  void tileStep(const ProgramRows &rows, const KvWalk &walk, Value n0,
                Value nValid, RowMask listed);
  void epilogue(const ProgramRows &rows);

  LoopEmitter &e;
  TileShape shape;
  AttentionMath math;
  AttentionOutput o;
  Value q;
  // Program-local buffers.
  Value qTile, kTile, vTile, sTile, acc, rowMax, rowSum;
};

/// The CPU target: an scf.parallel grid of TiledAttentionBuilder programs.
class LoopProgramTarget : public ProgramTarget {
public:
  void grid(LoopEmitter &e, ArrayRef<Value> ubs,
            llvm::function_ref<void(ValueRange)> body,
            Value kvBytesPerSequence) override;
  void emitProgram(LoopEmitter &e, const TileShape &shape,
                   const AttentionFeatures &f, const AttentionOutput &o,
                   Value q, const ProgramRows &rows,
                   ArrayRef<KvWalk> walks) override;
  void spread(LoopEmitter &e, Value lo, Value hi,
              llvm::function_ref<void(Value)> body) override {
    e.forLoop(lo, hi, body);
  }
};

} // namespace mlir::attn

#endif // ATTN_CONVERSION_ATTNTOSCF_TILEDATTENTION_H

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

#ifndef ATTN_LIB_TRANSFORMS_TILEDATTENTION_H
#define ATTN_LIB_TRANSFORMS_TILEDATTENTION_H

#include "LoopEmitter.h"
#include "attn/IR/AttnAttrs.h"

#include <functional>
#include <optional>

namespace mlir::attn {

/// Static shape of a program's tiles.
struct TileShape {
  int64_t blockQ;   // query tokens per program
  int64_t blockN;   // keys per KV tile
  int64_t pack;     // query heads per program (all of one KV head)
  int64_t headDim;
  int64_t rows() const { return blockQ * pack; }
};

/// Score modifiers, masks and output handling of one op (values are null
/// when the feature is off).
struct AttentionFeatures {
  Value scale;                 // f32 softmax scale
  Value softcap;               // f32
  Value alibiSlopes;           // [q_heads] f32
  AlibiForm alibiForm = AlibiForm::relative;
  Value sinks;                 // [q_heads] f32
  std::optional<int64_t> window;
  bool causal = false;
  Value bias;                  // [1|batch, q_heads, max_q, max_k]
  Value dropoutP, philoxSeed, philoxOffset;
  Value pScale;                // flash fp8: P is quantized to pQuantType
  Type pQuantType;
  int64_t numQueryHeads = 0;   // for the dropout counter
};

/// Where a program's results go.
struct AttentionOutput {
  Value out;                   // [tokens, q_heads, D] or split [.., S, D]
  Value outScale;              // fp8 out
  Value segmentMax, segmentSum; // split-KV form
};

/// Run-time description of one program's rows. Row r of the M tile is token
/// `r / pack` of the tile and query head `headBase + r % pack`.
struct ProgramRows {
  Value qTokBase;    // row of q/out of the tile's first token
  Value numTokens;   // valid tokens in this tile (<= blockQ)
  Value qposBase;    // position of the first token (for masks and ALiBi)
  Value seqRowBase;  // index of the first token within its sequence
  Value headBase;    // first query head
  Value ctx;         // keys before the sequence's first query (ALiBi context)
  Value batch;       // sequence index (bias, dropout)
  Value lenQ, lenK;  // sequence lengths (bias, dropout)
  Value segment;     // split-KV segment index (split form only)
  Value qScale;      // dequantization scale of q (fp8 q only)
};

/// Fills row `slot` of the K and V tiles ([blockN, D] f32) with key `key`,
/// dequantized.
using KeyLoader =
    std::function<void(LoopEmitter &, Value key, Value slot, Value kTile,
                       Value vTile)>;

/// A range of key positions [lo, hi) and where its keys live. A walk may
/// also enumerate its own sub-ranges (CSR blocks) through `forEachRange`.
struct KvWalk {
  Value lo, hi;
  KeyLoader load;
  /// When set, the walk visits the ranges this enumerates (each already
  /// clipped to [lo, hi)) instead of [lo, hi) itself.
  std::function<void(LoopEmitter &,
                     llvm::function_ref<void(Value, Value)> visit)>
      forEachRange;
};

class TiledAttentionBuilder {
public:
  TiledAttentionBuilder(LoopEmitter &e, TileShape shape,
                        AttentionFeatures features, AttentionOutput output,
                        Value q)
      : e(e), shape(shape), f(std::move(features)), o(std::move(output)),
        q(q) {}

  /// The key positions [lo, hi) that any row of the program can see under
  /// the causal and window masks; walks intersect their ranges with it, so
  /// fully masked tiles are never visited.
  std::pair<Value, Value> visibleKeyRange(const ProgramRows &rows);

  /// Emits the program: load the query tile, walk every KV range tile by
  /// tile, then write the epilogue.
  void emitProgram(const ProgramRows &rows, ArrayRef<KvWalk> walks);

private:
  void loadQueries(const ProgramRows &rows);
  void initState(const ProgramRows &rows);
  void walkRange(const ProgramRows &rows, const KvWalk &walk, Value lo,
                 Value hi);
  void tileStep(const ProgramRows &rows, const KvWalk &walk, Value n0,
                Value nValid);
  Value score(const ProgramRows &rows, Value row, Value key, Value dot);
  Value visible(const ProgramRows &rows, Value row, Value key);
  Value dropoutKeep(const ProgramRows &rows, Value row, Value key);
  void epilogue(const ProgramRows &rows);

  Value tokenOf(Value row) { return e.divU(row, e.idx(shape.pack)); }
  Value headOf(const ProgramRows &rows, Value row) {
    return e.add(rows.headBase, e.remU(row, e.idx(shape.pack)));
  }

  LoopEmitter &e;
  TileShape shape;
  AttentionFeatures f;
  AttentionOutput o;
  Value q;
  // Program-local buffers.
  Value qTile, kTile, vTile, sTile, acc, rowMax, rowSum;
};

} // namespace mlir::attn

#endif // ATTN_LIB_TRANSFORMS_TILEDATTENTION_H

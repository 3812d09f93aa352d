//===- GpuStaging.h - global rows into shared-memory tiles ------*- C++ -*-===//
//
// Every GPU program stages its Q, K and V tiles the same way: the block's
// threads each take chunks of 8 elements of a row (raw fp8 tiles may take
// 16, Hooks::rawChunkElems); a chunk whose source is
// 8 adjacent elements of the tile's type is moved whole (16 bytes; 32 of f32),
// an fp8 chunk is loaded as 8 bytes and decoded in registers, and anything else
// (strided or ragged rows, scales) is gathered element by element, zero
// outside the row. Targets differ only in how a whole chunk moves (NVIDIA:
// cp.async; AMD: a load and an LDS store) and how fp8 decodes (sm_89+:
// hardware pairs; otherwise Fp8Codec's exact integer code).
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_CONVERSION_ATTNTOGPU_GPUSTAGING_H
#define ATTN_CONVERSION_ATTNTOGPU_GPUSTAGING_H

#include "attn/Conversion/AttnToSCF/TiledAttention.h"

#include <functional>

namespace mlir::attn {

/// One row of a tile being staged in shared memory: element x of the row is
/// `mem[at(x)] * scale`, for x < limit (the head dim when null); the rest
/// of the row, and all of it when !valid, is zero.
struct StagedRow {
  Value valid;
  Value mem;
  std::function<SmallVector<Value>(Value)> at;
  Value scale;         // dequantization, or null
  Type quantize;       // fp8 type to quantize to on load, or null
  bool chunks = false; // elements x0 .. x0 + 7 (x0 a multiple of 8) are
                       // adjacent, x0's indices first (KeyRow::kChunks)
  Value limit;         // run-time row length, or null
  int64_t length = 0;  // the row length when limit is null (0: head dim)
  /// The indices stay in bounds where the row is not valid (it reads a
  /// valid row instead), so its chunks may be loaded regardless.
  bool inRange = false;
};

/// The rows a program stages for KV tile [n0, n0 + nValid) of a walk (a
/// null nValid is a full tile: no clamps, so addresses stay affine in n0).
/// Keys are never located past the range; rows past nValid are zero (their
/// keys are masked, and a zero V row keeps p = 0 columns from multiplying
/// garbage).
class KvTileRows {
public:
  KvTileRows(LoopEmitter &e, const KvWalk &walk, Value n0, Value nValid,
             int64_t headDim)
      : e(e), walk(walk), n0(n0), nValid(nValid), headDim(headDim),
        lastKey(nValid ? e.add(n0, e.sub(nValid, e.idx(1))) : Value()) {}
  /// Row r of K (isK) or V; `scaled` false leaves out the dequantization
  /// scale (tiles of raw fp8).
  StagedRow key(Value r, bool isK, bool scaled = true) const;
  /// Row d of V^T on a key-major walk: elements are keys, 8-key chunks of
  /// one page (n0 is a multiple of 8, KvWalk::valueKeyMajor). Without
  /// nValid (a full tile), a row of `keys` keys: whole chunks, no clamp.
  StagedRow valueColumn(Value d, int64_t keys = 0) const;

private:
  LoopEmitter &e;
  const KvWalk &walk;
  Value n0, nValid;
  int64_t headDim;
  Value lastKey;
};

class TileStager {
public:
  /// Indices in a tile of its element (r, x): for x0 a multiple of 8,
  /// elements x0 .. x0 + 7 follow (r, x0) in the tile unless it is staged
  /// transposed.
  using TileIndex = std::function<SmallVector<Value>(Value r, Value x0)>;
  struct Hooks {
    /// Copies a whole chunk from global to shared memory asynchronously;
    /// `count` (null: all) elements are read, the rest zero-filled. Null:
    /// the chunk is loaded and stored through registers.
    std::function<void(Value dst, ValueRange dstAt, Value src, ValueRange srcAt,
                       Value count)>
        copyChunk;
    /// Decodes vector<8 x fp8> to 8 exact f32 values. Null: Fp8Codec.
    std::function<SmallVector<Value>(Value raw)> decodeFp8;
    /// A ragged chunk (part of a row past its run-time limit) is one copy
    /// of its elements that exist, zero-filling the rest, instead of
    /// element-by-element stores: staging is then copies only, which a
    /// producer tracks on an mbarrier (cp.async.mbarrier.arrive).
    bool partialCopies = false;
    /// Where this thread's it-th chunk goes: (row, x0), x0 a multiple of 8,
    /// the chunks of all threads and iterations covering the tile once.
    /// Null: chunk tid + it * threads in row-major order. (Staging in
    /// unrolled steps only; otherwise row-major.) Lets a tile's layout
    /// decide which chunks a warp's copies take together, and a thread
    /// stage chunks that share a row or a page, looked up once.
    std::function<std::pair<Value, Value>(int64_t it)> place;
    /// Whole fp8 chunks of rows that are in range (StagedRow::inRange) are
    /// loaded and decoded whatever the row's validity, then zeroed by a
    /// select: no branch per chunk, so a thread's loads of a tile are in
    /// flight together instead of one after the other.
    bool selectRows = false;
    /// Whole fp8 chunks decoded in registers are stored saying that they
    /// start on a boundary of their size (up to 16 bytes): tiles whose
    /// rows and offsets are whole 16-byte units. Without it LLVM may not
    /// see the alignment through a tile's index arithmetic and split a
    /// chunk into element stores. (Ragged and moved chunks keep LLVM's
    /// choice: saying it there ran 1.1% slower on H200, prefix prefill
    /// of heads of 256, bench/results/2026-11-29-h200-prefix-schedules.md.)
    bool alignedChunks = false;
    /// Elements of a chunk of a raw fp8 tile: 8, or 16 where the source
    /// rows hold whole runs of 16 (x0 a multiple of 16, as StagedRow::chunks
    /// says of 8; vLLM's fp8 split-x K cache, x = 16) and the tile keeps
    /// them together: one 16-byte copy each instead of two of 8.
    int64_t rawChunkElems = 8;
    /// Tiles whose chunks are no whole number a thread are staged unrolled
    /// too (row-major), the last chunk of some threads under a test,
    /// instead of in a loop with a test each: a thread's loads of a tile
    /// are then in flight together.
    bool unrollRaggedTail = false;
  };

  /// `tid` counts the `threads` threads that share the staging; rows are
  /// `headDim` elements unless a StagedRow says otherwise; `ct` is the
  /// element type of tiles that do not hold raw fp8.
  TileStager(LoopEmitter &e, Value tid, int64_t threads, int64_t headDim,
             Type ct, Hooks hooks)
      : e(e), tid(tid), threads(threads), headDim(headDim), ct(ct),
        hooks(std::move(hooks)) {}

  /// Stages `numRows` rows of `rowElems` elements (a multiple of 8) into
  /// `dst` (a shared-memory memref whose elements are ct or raw fp8, the
  /// stored bytes), at the indices `at` gives. `transposed`: the elements
  /// of a chunk are stored one by one (a [D, keys] tile from key rows).
  void stage(Value dst, const TileIndex &at, int64_t numRows, int64_t rowElems,
             llvm::function_ref<StagedRow(Value)> source,
             bool transposed = false);
  /// Elements of the chunks stage() takes in tiles of `tileType`: 8, or
  /// Hooks::rawChunkElems for raw fp8 tiles (for Hooks::place).
  static int64_t chunkElems(Type tileType, int64_t rawChunkElems);

private:
  LoopEmitter &e;
  Value tid;
  int64_t threads, headDim;
  Type ct;
  Hooks hooks;
};

} // namespace mlir::attn

#endif // ATTN_CONVERSION_ATTNTOGPU_GPUSTAGING_H

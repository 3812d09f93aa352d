//===- LowerKernelOps.cpp - attn kernel ops -> programs on a grid -*- C++
//-*-===//
//
// Each kernel op becomes a grid of programs (query tile x head group
// [x segment]) emitted through a ProgramTarget. The query tiles of all
// sequences are numbered consecutively: sequence b's tiles start at
// floor(offsets[b] / block_q) + b, so the grid extent floor(tokens /
// block_q) + batch depends only on shapes, and a program finds its sequence
// by a search (ProgramTarget::searchLast). The code here only says which
// rows a program owns and where its keys come from: the paged split-x cache
// and the new tokens (prefix prefill), the paged NHD cache and its segments
// (unified), a dense varlen range (flash) and the CSR block list
// (blocksparse).
//
//===----------------------------------------------------------------------===//

#include "attn/Conversion/AttnToSCF/KernelLowering.h"
#include "attn/Conversion/Passes.h"
#include "attn/Transforms/Schedule.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::attn;

namespace {

Type elemOf(Value v) { return cast<MemRefType>(v.getType()).getElementType(); }

/// Sequence `b`'s rows [start, start + len) of a varlen offsets array.
struct SeqRange {
  Value start, len;
};
SeqRange seqRange(LoopEmitter &e, Value offsets, Value b) {
  Value start = e.loadIndex(offsets, {b});
  return {start, e.sub(e.loadIndex(offsets, {e.add(b, e.idx(1))}), start)};
}

/// The query tile of program `pid`: the sequence b whose tiles start at
/// floor(offsets[b] / blockQ) + b <= pid (the largest such b), and the tile
/// index within it. The tile may lie past the sequence's end.
std::pair<Value, Value> locateTile(LoopEmitter &e, ProgramTarget &target,
                                   Value offsets, Value batch, Value pid,
                                   int64_t blockQ) {
  auto firstTile = [&](LoopEmitter &e, Value seq) {
    return e.add(e.divU(e.loadIndex(offsets, {seq}), e.idx(blockQ)), seq);
  };
  Value seq = target.searchLast(e, batch, pid, firstTile);
  return {seq, e.sub(pid, firstTile(e, seq))};
}

unsigned operandIndex(Operation *op, Value v) {
  for (OpOperand &operand : op->getOpOperands())
    if (operand.get() == v)
      return operand.getOperandNumber();
  llvm_unreachable("value is not an operand of op");
}

/// Sequences of a unified op bounded by `max_query_len` have at most that
/// many query tiles: its programs then index (sequence, tile) directly, a
/// grid of tiles x batch without the search, so that the decode half of a
/// mixed batch launches no program for each prefill tile. 0: the varlen
/// grid (other ops, no bound, or a bound of many tiles).
int64_t tilesPerSequence(Operation *op, int64_t blockQ) {
  constexpr int64_t kMaxTilesPerSequence = 4;
  auto unified = dyn_cast<UnifiedOp>(op);
  if (!unified || !unified.getMaxQueryLenAttr())
    return 0;
  int64_t tiles =
      llvm::divideCeil(unified.getMaxQueryLenAttr().getInt(), blockQ);
  return tiles <= kMaxTilesPerSequence ? tiles : 0;
}

/// [floor(tokens / blockQ) + batch, groups, segments] for a varlen op whose
/// queries are `q` and sequence offsets `offsets` (batch + 1 entries), or
/// [tilesPerSequence x batch, groups, segments].
/// `segments` 0: dim 2 of `partial` at run time.
SmallVector<GridExtent> varlenGrid(Operation *op, Value q, Value offsets,
                                   int64_t blockQ, int64_t groups,
                                   int64_t segments, Value partial) {
  GridExtent tiles;
  tiles.terms = {{operandIndex(op, q), 0, blockQ},
                 {operandIndex(op, offsets), 0, 1}};
  tiles.constant = -1;
  if (int64_t perSeq = tilesPerSequence(op, blockQ)) {
    tiles.terms.assign(perSeq, {operandIndex(op, offsets), 0, 1});
    tiles.constant = -perSeq;
  }
  GridExtent g, s;
  g.constant = groups;
  if (segments)
    s.constant = segments;
  else
    s.terms = {{operandIndex(op, partial), 2, 1}};
  return {tiles, g, s};
}

/// Program rows shared by the varlen ops: tile `t` of a sequence whose
/// queries start at row `qStart`, with positions offset by `posShift`.
ProgramRows tileRows(LoopEmitter &e, const TileShape &shape, Value b, Value t,
                     Value group, Value qStart, Value lenQ, Value lenK,
                     Value posShift) {
  ProgramRows rows;
  Value first = e.mul(t, e.idx(shape.blockQ));
  rows.qTokBase = e.add(qStart, first);
  rows.numTokens = e.min(e.idx(shape.blockQ), e.sub(lenQ, first));
  rows.qposBase = e.add(posShift, first);
  rows.seqRowBase = first;
  rows.headBase = e.mul(group, e.idx(shape.pack));
  rows.ctx = posShift;
  rows.batch = b;
  rows.lenQ = lenQ;
  rows.lenK = lenK;
  return rows;
}

TileShape shapeOf(Operation *op, int64_t headDim) {
  ScheduleAttr s = scheduleOrDefault(op);
  return TileShape{
      s.getBlockQ(),     s.getBlockN(), s.getHeadsPerProgram(), headDim,
      s.getWarps(),      s.getTma(),    s.getProducerWarps(),   s.getPingpong(),
      s.getPersistent(), s.getStages()};
}

Value scaleOrNull(LoopEmitter &e, Value memref) {
  return memref ? e.loadScalar(memref) : Value();
}

/// A descale that is one value or one per (sequence, KV head): a one-value
/// descale is loaded once (`once`), a per-sequence one by each program.
Value descaleFor(LoopEmitter &e, Value memref, Value once, Value seq,
                 Value kvHead) {
  if (!memref || cast<MemRefType>(memref.getType()).getRank() != 2)
    return once;
  return e.load(memref, {seq, kvHead});
}

Value scalarScaleOrNull(LoopEmitter &e, Value memref) {
  if (!memref || cast<MemRefType>(memref.getType()).getRank() == 2)
    return Value();
  return e.loadScalar(memref);
}

/// Keys of a dense [tokens, kv_heads, D] pair starting at row `base`.
KeyLocator denseKeys(Value k, Value v, Value base, Value kvHead, Value kScale,
                     Value vScale, Type quantize = Type()) {
  return [=](LoopEmitter &e, Value key) {
    Value row = e.add(base, key);
    KeyRow r{k, v, nullptr, nullptr, kScale, vScale, true, true, quantize};
    r.kAt = r.vAt = [=](Value d) { return SmallVector<Value>{row, kvHead, d}; };
    return r;
  };
}

/// Dense flash under a persistent schedule (whose programs a target
/// orders): the K and V bytes of one KV head of an average sequence, from
/// the shapes alone (null otherwise).
Value kvBytesPerSequence(LoopEmitter &e, Operation *op, Value batch) {
  auto flash = dyn_cast<FlashOp>(op);
  if (!flash || !scheduleOrDefault(op).getPersistent() ||
      ShapedType::isDynamic(flash.getK().getType().getShape().back()) ||
      ShapedType::isDynamic(flash.getV().getType().getShape().back()))
    return Value();
  auto rowBytes = [](Value m) {
    auto type = cast<MemRefType>(m.getType());
    return type.getShape().back() *
           std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
  };
  Value keys = memref::DimOp::create(e.builder(), flash.getK(), 0);
  Value bytes =
      e.mul(keys, e.idx(rowBytes(flash.getK()) + rowBytes(flash.getV())));
  return e.divU(bytes, arith::MaxUIOp::create(e.builder(), batch, e.idx(1)));
}

/// Runs `body(b, t, g, s)` for every query tile t of sequence b, head group
/// g and segment s of a varlen op's grid (see varlenGrid).
void forEachTile(LoopEmitter &e, ProgramTarget &target, Operation *op, Value q,
                 Value offsets, int64_t blockQ,
                 llvm::function_ref<void(Value, Value, Value, Value)> body) {
  FailureOr<SmallVector<GridExtent>> extents = kernelGrid(op);
  SmallVector<Value> ubs;
  for (const GridExtent &x : *extents)
    ubs.push_back(x.materialize(e, op->getOperands()));
  Value batch = e.sub(memref::DimOp::create(e.builder(), offsets, 0), e.idx(1));
  int64_t perSeq = tilesPerSequence(op, blockQ);
  target.grid(
      e, ubs,
      [&](ValueRange iv) {
        if (perSeq) {
          body(e.divU(iv[0], e.idx(perSeq)), e.remU(iv[0], e.idx(perSeq)),
               iv[1], iv[2]);
          return;
        }
        auto [seq, tile] = locateTile(e, target, offsets, batch, iv[0], blockQ);
        body(seq, tile, iv[1], iv[2]);
      },
      kvBytesPerSequence(e, op, batch));
}

/// The dense varlen ops (flash, blocksparse): keys are rows of k/v, with
/// query i at the bottom-right aligned position i + Lk - Lq. `refineWalk`
/// may restrict a program's walk (blocksparse's CSR blocks).
void emitDenseVarlen(
    LoopEmitter &e, ProgramTarget &target, Operation *op,
    const TileShape &shape, int64_t group, const AttentionFeatures &f,
    const AttentionOutput &out, Value q, Value k, Value v, Value cuQ, Value cuK,
    Value qScale, Value kScale, Value vScale, Type quantize,
    llvm::function_ref<void(LoopEmitter &, const ProgramRows &, KvWalk &)>
        refineWalk) {
  forEachTile(
      e, target, op, q, cuQ, shape.blockQ,
      [&](Value bIdx, Value t, Value g, Value) {
        SeqRange qRange = seqRange(e, cuQ, bIdx),
                 kRange = seqRange(e, cuK, bIdx);
        Value lenQ = qRange.len, lenK = kRange.len;
        e.ifThen(e.lt(e.mul(t, e.idx(shape.blockQ)), lenQ), [&] {
          ProgramRows rows = tileRows(e, shape, bIdx, t, g, qRange.start, lenQ,
                                      lenK, e.sub(lenK, lenQ));
          rows.qScale = qScale;
          rows.qQuantize = quantize;
          Value kvHead = e.divU(rows.headBase, e.idx(group));
          auto [lo, hi] = AttentionMath(e, shape, f).visibleKeyRange(rows);
          KvWalk walk;
          walk.lo = lo;
          walk.hi = e.min(hi, lenK);
          walk.locate =
              denseKeys(k, v, kRange.start, kvHead, kScale, vScale, quantize);
          // (Keys quantized on load are no raw fp8 bytes.)
          walk.keyType =
              !quantize || elemOf(k) == quantize ? elemOf(k) : Type();
          walk.keyScale = kScale;
          // (Scales only come with fp8 K/V: a program that loads their
          // tiles whole multiplies by them itself.)
          if (!quantize) {
            walk.denseK = k;
            walk.denseV = v;
            walk.denseBase = kRange.start;
            walk.denseHead = kvHead;
          }
          refineWalk(e, rows, walk);
          target.emitProgram(e, shape, f, out, q, rows, {walk});
        });
      });
}

std::optional<int64_t> windowOf(IntegerAttr attr) {
  return attr ? std::optional<int64_t>(attr.getInt()) : std::nullopt;
}

/// The score modifiers the paged ops (prefix prefill, unified) share:
/// scale, ALiBi, sinks and a sliding window, causal.
template <typename PagedOp> AttentionFeatures pagedFeatures(PagedOp op) {
  AttentionFeatures f;
  f.scale = op.getScale();
  f.alibiSlopes = op.getAlibiSlopes();
  f.alibiForm = op.getAlibiFormOrDefault();
  f.sinks = op.getSinks();
  f.window = windowOf(op.getSlidingWindowAttr());
  f.causal = true;
  return f;
}

//===----------------------------------------------------------------------===//
// attn.prefix_prefill
//===----------------------------------------------------------------------===//

void emitPrefixPrefill(LoopEmitter &e, ProgramTarget &target,
                       PrefixPrefillOp op) {
  TileShape shape = shapeOf(op, op.getHeadDim());
  int64_t group = op.getNumQueryHeads() / op.getNumKvHeads();
  int64_t blockSize = op.getBlockSize(), split = op.getKeySplit();

  AttentionFeatures f = pagedFeatures(op);
  AttentionOutput out{op.getOut(), op.getOutScale(), {}, {}};
  Value kScale = scaleOrNull(e, op.getKScale());
  Value vScale = scaleOrNull(e, op.getVScale());

  forEachTile(
      e, target, op, op.getQ(), op.getQueryStart(), shape.blockQ,
      [&](Value bIdx, Value t, Value g, Value) {
        SeqRange qRange = seqRange(e, op.getQueryStart(), bIdx);
        Value qStart = qRange.start, lenQ = qRange.len;
        Value lenK = e.loadIndex(op.getSeqLens(), {bIdx});
        Value ctx = e.sub(lenK, lenQ);
        Value run = e.lt(e.mul(t, e.idx(shape.blockQ)), lenQ);
        if (op.getSkipDecode())
          run = e.andI(run, e.cmp(arith::CmpIPredicate::ne, lenQ, e.idx(1)));
        e.ifThen(run, [&] {
          ProgramRows rows =
              tileRows(e, shape, bIdx, t, g, qStart, lenQ, lenK, ctx);
          Value kvHead = e.divU(rows.headBase, e.idx(group));
          auto [lo, hi] = AttentionMath(e, shape, f).visibleKeyRange(rows);

          // Phase 1: the cached context through the block table.
          // The walk starts at a multiple of 8 (keys below lo are masked), so
          // that 8-key runs of a page stay whole.
          KvWalk cache;
          cache.lo = e.mul(e.divU(lo, e.idx(8)), e.idx(8));
          cache.hi = e.min(hi, ctx);
          cache.valueKeyMajor = blockSize % 8 == 0;
          cache.valueRun = blockSize;
          cache.paged = true;
          cache.splitKeys = true;
          cache.keyType =
              cast<MemRefType>(op.getKCache().getType()).getElementType();
          cache.keyScale = kScale;
          Value kc = op.getKCache(), vc = op.getVCache(),
                bt = op.getBlockTable();
          cache.locate = [=](LoopEmitter &e, Value key) {
            Value blk = e.loadIndex(bt, {bIdx, e.divU(key, e.idx(blockSize))});
            Value off = e.remU(key, e.idx(blockSize));
            // The K cache splits D into [D / x, x] (8-element chunks stay whole
            // when x is a multiple of 8); the V cache is [D, page].
            KeyRow r{kc,     vc,     nullptr,        nullptr,
                     kScale, vScale, split % 8 == 0, false,
                     Type()};
            r.kAt = [=, &e](Value d) {
              return SmallVector<Value>{blk, kvHead, e.divU(d, e.idx(split)),
                                        off, e.remU(d, e.idx(split))};
            };
            r.vAt = [=](Value d) {
              return SmallVector<Value>{blk, kvHead, d, off};
            };
            return r;
          };
          // Phase 2: the new tokens, causally.
          KvWalk fresh;
          fresh.lo = e.max(lo, ctx);
          fresh.hi = e.min(hi, lenK);
          fresh.keyType =
              cast<MemRefType>(op.getK().getType()).getElementType();
          // (Stored as they are: a warp-specialized program may load their
          // tiles whole.)
          Value freshBase = e.sub(qStart, ctx);
          fresh.locate = denseKeys(op.getK(), op.getV(), freshBase, kvHead,
                                   Value(), Value());
          fresh.denseK = op.getK();
          fresh.denseV = op.getV();
          fresh.denseBase = freshBase;
          fresh.denseHead = kvHead;
          target.emitProgram(e, shape, f, out, op.getQ(), rows, {cache, fresh});
        });
      });
}

//===----------------------------------------------------------------------===//
// attn.unified
//===----------------------------------------------------------------------===//

void emitUnified(LoopEmitter &e, ProgramTarget &target, UnifiedOp op) {
  TileShape shape = shapeOf(op, op.getHeadDim());
  int64_t group = op.getNumQueryHeads() / op.getNumKvHeads();
  int64_t blockSize = op.getBlockSize();

  AttentionFeatures f = pagedFeatures(op);
  f.softcap = op.getSoftcap();
  f.qqBias = op.getQqBias();
  f.mmPrefixRange = op.getMmPrefixRange();
  f.mmClampWindow = op.getMmPrefixClampWindow();
  f.rswaPrefixLens = op.getRswaPrefixLens();
  if (IntegerAttr w = op.getRswaWindowAttr())
    f.rswaWindow = w.getInt();
  f.causalFlags = op.getCausalFlags();
  f.causal = !op.getBidirectional() && !f.causalFlags;
  if (IntegerAttr lookback = op.getChunkLookbackAttr()) {
    f.chunkLookback = lookback.getInt();
    f.chunkSize = *f.window / (*f.chunkLookback + 1);
  }
  AttentionOutput out{op.getOut(), op.getOutScale(), op.getSegmentMax(),
                      op.getSegmentSum(), op.getLse()};
  // The split form's programs leave sinks, the output scale and the lse
  // (the fused merge's, over every segment) to the merge.
  if (op.isSplitKv()) {
    f.sinks = Value();
    out.outScale = Value();
    out.lse = Value();
  }
  Value outScale = op.fusesMerge() && op.getOutScale()
                       ? e.loadScalar(op.getOutScale())
                       : Value();
  Value qScaleOnce = scalarScaleOrNull(e, op.getQDescale());
  Value kScaleOnce = scalarScaleOrNull(e, op.getKDescale());
  Value vScaleOnce = scalarScaleOrNull(e, op.getVDescale());

  forEachTile(
      e, target, op, op.getQ(), op.getCuSeqlensQ(), shape.blockQ,
      [&](Value bIdx, Value t, Value g, Value s) {
        SeqRange qRange = seqRange(e, op.getCuSeqlensQ(), bIdx);
        Value qStart = qRange.start, lenQ = qRange.len;
        Value lenK = e.loadIndex(op.getSequsedK(), {bIdx});
        Value ctx = e.sub(lenK, lenQ);
        Value run = e.lt(e.mul(t, e.idx(shape.blockQ)), lenQ);
        // Sequences outside the query-count range belong to another op.
        if (IntegerAttr lo = op.getMinQueryLenAttr())
          run = e.andI(
              run, e.cmp(arith::CmpIPredicate::uge, lenQ, e.idx(lo.getInt())));
        if (IntegerAttr hi = op.getMaxQueryLenAttr())
          run = e.andI(
              run, e.cmp(arith::CmpIPredicate::ule, lenQ, e.idx(hi.getInt())));
        e.ifThen(run, [&] {
          ProgramRows rows =
              tileRows(e, shape, bIdx, t, g, qStart, lenQ, lenK, ctx);
          rows.segment = s;
          // Partials by sequence: R rows a sequence (b * R + i).
          if (op.getSequencePartials())
            rows.partialRowBase =
                e.add(e.mul(bIdx, e.idx(op.getMaxQueryLenAttr().getInt())),
                      rows.seqRowBase);
          Value kvHead = e.divU(rows.headBase, e.idx(group));
          Value qScale =
              descaleFor(e, op.getQDescale(), qScaleOnce, bIdx, kvHead);
          Value kScale =
              descaleFor(e, op.getKDescale(), kScaleOnce, bIdx, kvHead);
          Value vScale =
              descaleFor(e, op.getVDescale(), vScaleOnce, bIdx, kvHead);
          rows.qScale = qScale;
          auto [lo, hi] = AttentionMath(e, shape, f).visibleKeyRange(rows);
          KvWalk walk;
          walk.lo = lo;
          walk.hi = e.min(hi, lenK);
          Value segments;
          if (op.isSplitKv()) {
            // Segment s: pages [s * pps, (s + 1) * pps), pps = ceil(N /
            // (S*BS)); S static, or out's dim 2 at run time.
            int64_t n = op.getGridSplits();
            segments = n ? e.idx(n)
                         : memref::DimOp::create(e.builder(), op.getOut(), 2)
                               .getResult();
            Value pps = e.ceilDiv(lenK, e.mul(segments, e.idx(blockSize)));
            Value segKeys = e.mul(pps, e.idx(blockSize));
            walk.lo = e.max(walk.lo, e.mul(s, segKeys));
            walk.hi = e.min(walk.hi, e.mul(e.add(s, e.idx(1)), segKeys));
          }
          Value kc = op.getKCache(), vc = op.getVCache(),
                bt = op.getBlockTable();
          Value kScales = op.getKScaleCache(), vScales = op.getVScaleCache();
          walk.paged = true;
          walk.pagedK = kc;
          walk.pagedV = vc;
          walk.keyType = cast<MemRefType>(kc.getType()).getElementType();
          // Per-token-head scales differ from key to key.
          walk.keyScale = kScales ? Value() : kScale;
          walk.locate = [=](LoopEmitter &e, Value key) {
            Value blk = e.loadIndex(bt, {bIdx, e.divU(key, e.idx(blockSize))});
            Value off = e.remU(key, e.idx(blockSize));
            KeyRow r{kc,     vc,   nullptr, nullptr, kScale,
                     vScale, true, true,    Type()};
            if (kScales) {
              r.kScale = e.load(kScales, {blk, off, kvHead});
              r.vScale = e.load(vScales, {blk, off, kvHead});
            }
            r.kAt = r.vAt = [=](Value d) {
              return SmallVector<Value>{blk, off, kvHead, d};
            };
            return r;
          };
          target.emitProgram(e, shape, f, out, op.getQ(), rows, {walk});
          if (!op.fusesMerge())
            return;
          // The fused merge: the tile's last segment program to finish
          // merges the tile's rows (docs/semantics.md, 3.5).
          Value last =
              target.lastArrival(e, op.getMergeCounters(),
                                 {rows.partialBase(), rows.headBase}, segments);
          e.ifThen(last, [&] {
            SegmentStates states{
                op.getOut(),   op.getSegmentMax(), op.getSegmentSum(),
                op.getSinks(), outScale,           op.getMergedOut(),
                segments,      shape.headDim,      op.getLse()};
            states.wholeRounds = target.wholeMergeRounds(shape);
            Value pack = e.idx(shape.pack);
            emitMergeRows(
                e, target, states, e.mul(rows.numTokens, pack), [&](Value r) {
                  Value tok = e.divU(r, pack);
                  return MergeRow{e.add(rows.partialBase(), tok),
                                  e.add(rows.qTokBase, tok),
                                  e.add(rows.headBase, e.remU(r, pack))};
                });
          });
        });
      });
}

//===----------------------------------------------------------------------===//
// attn.flash
//===----------------------------------------------------------------------===//

void emitFlash(LoopEmitter &e, ProgramTarget &target, FlashOp op) {
  TileShape shape = shapeOf(op, op.getHeadDim());
  int64_t group = op.getNumQueryHeads() / op.getNumKvHeads();

  AttentionFeatures f;
  f.scale = op.getScale();
  f.causal = op.getCausal();
  f.bias = op.getBias();
  f.dropoutP = op.getDropoutP();
  f.philoxSeed = op.getPhiloxSeed();
  f.philoxOffset = op.getPhiloxOffset();
  f.numQueryHeads = op.getNumQueryHeads();
  // Inputs quantized on load follow the fp8 path from there on.
  Type quantize = op.getQuantizeTo() ? *op.getQuantizeTo() : Type();
  if (quantize || isFp8(elemOf(op.getQ()))) {
    f.pScale = e.loadScalar(op.getPScale());
    f.pQuantType = quantize ? quantize : elemOf(op.getV());
  }
  AttentionOutput out{op.getOut(), op.getOutScale(), {}, {}, op.getLse()};
  emitDenseVarlen(
      e, target, op, shape, group, f, out, op.getQ(), op.getK(), op.getV(),
      op.getCuSeqlensQ(), op.getCuSeqlensK(), scaleOrNull(e, op.getQScale()),
      scaleOrNull(e, op.getKScale()), scaleOrNull(e, op.getVScale()), quantize,
      [](LoopEmitter &, const ProgramRows &, KvWalk &) {});
}

//===----------------------------------------------------------------------===//
// attn.blocksparse
//===----------------------------------------------------------------------===//

/// The CSR rows a block-sparse program over two layout rows walks.
struct RowPairLayout {
  Value crow, col, numRows, layoutHead;
  Value row, lastRow; // the first layout row, the last token's
  Value hi;           // keys from hi on are past the walk
  int64_t blockSize;
};

/// KvWalk::forEachBlockTile of a program over layout rows `row` and `row +
/// 1`: the union of their CSR lists, merged in ascending order (semantics
/// 3.4), `perTile` blocks a visit.
Value walkRowPair(
    LoopEmitter &e, const RowPairLayout &l, int64_t perTile,
    llvm::function_ref<void(Value, ArrayRef<SparseBlock>)> visit) {
  // Each row's entries [begin, end); rows past the layout, and a second
  // row the tokens do not reach (a program of one token, decode), list
  // nothing.
  auto entries = [&](Value row, Value used) {
    Value ok = e.andI(used, e.lt(row, l.numRows));
    Value at = e.min(row, e.sub(l.numRows, e.idx(1)));
    Value begin = e.loadIndex(l.crow, {l.layoutHead, at});
    Value end = e.loadIndex(l.crow, {l.layoutHead, e.add(at, e.idx(1))});
    return std::make_pair(e.select(ok, begin, e.idx(0)),
                          e.select(ok, end, e.idx(0)));
  };
  auto [aBegin, endA] = entries(l.row, e.boolean(true));
  auto [bBegin, endB] = entries(e.add(l.row, e.idx(1)), e.lt(l.row, l.lastRow));
  Value bs = e.idx(l.blockSize);
  // Blocks from hiBlock on hold no key of the walk; ids ascend, so the
  // union ends at the first such block.
  Value hiBlock = e.ceilDiv(l.hi, bs);
  auto idAt = [&](Value i, Value end) {
    return e.ifElse(
        e.lt(i, end), {e.builder().getIndexType()},
        [&] {
          return SmallVector<Value>{e.loadIndex(l.col, {l.layoutHead, i})};
        },
        [&] { return SmallVector<Value>{hiBlock}; })[0];
  };
  // The next block of the union from entries i and j: the smaller id,
  // listed by the row(s) holding it; whether there is one; the entries
  // after it. (Ids are >= 0; a negative one, which a caller that skipped
  // the checks may pass, is taken as a block of no keys.)
  Value aEnd = endA, bEnd = endB; // (structured bindings: no captures)
  auto next = [&](Value i, Value j) {
    Value a = idAt(i, aEnd), b = idAt(j, bEnd);
    Value id = e.min(a, b);
    Value more = e.lt(id, hiBlock);
    Value inA = e.andI(more, e.eq(a, id));
    Value inB = e.andI(more, e.eq(b, id));
    Value listed = e.andI(more, e.le(e.idx(0), id));
    SparseBlock block;
    block.inFirstRow = e.andI(listed, inA);
    block.inSecondRow = e.andI(listed, inB);
    block.first = e.mul(e.max(id, e.idx(0)), bs);
    Value end = e.min(e.add(block.first, bs), l.hi);
    block.valid =
        e.select(listed, e.max(e.sub(end, block.first), e.idx(0)), e.idx(0));
    return std::make_tuple(block, more, e.select(inA, e.add(i, e.idx(1)), i),
                           e.select(inB, e.add(j, e.idx(1)), j));
  };
  SmallVector<Value> state = {aBegin, bBegin, e.idx(0)};
  return e.whileLoop(
      state,
      [&](ValueRange s) {
        Value more = std::get<1>(next(s[0], s[1]));
        return std::make_pair(more, SmallVector<Value>(s));
      },
      [&](ValueRange s) {
        Value i = s[0], j = s[1];
        SmallVector<SparseBlock> slots;
        for (int64_t k = 0; k < perTile; ++k) {
          auto [block, more, ni, nj] = next(i, j);
          // An empty slot repeats the first block's rows.
          if (k)
            block.first = e.select(more, block.first, slots.front().first);
          slots.push_back(block);
          i = ni, j = nj;
        }
        visit(s[2], slots);
        return SmallVector<Value>{i, j, e.add(s[2], e.idx(1))};
      })[2];
}

void emitBlockSparse(LoopEmitter &e, ProgramTarget &target, BlockSparseOp op) {
  TileShape shape = shapeOf(op, op.getHeadDim());
  int64_t group = op.getNumQueryHeads() / op.getNumKvHeads();
  int64_t blockSize = op.getBlockSizeAttr().getInt();
  int64_t qBlockSize = op.getQueryBlockSize();
  bool perHead = op.hasPerHeadLayout();

  AttentionFeatures f;
  f.scale = op.getScale();
  f.causal = true;
  AttentionOutput out{op.getOut(), {}, {}, {}};

  Value crow = op.getCrow(), col = op.getCol();
  Value numRows = e.sub(memref::DimOp::create(e.builder(), crow, 1), e.idx(1));
  // Programs over two layout rows (block_q twice the query block; the
  // verifier allows no other straddling) walk the union of their CSR rows,
  // and so do programs of one row whose target pairs its blocks.
  bool twoRows = shape.blockQ > qBlockSize;
  bool unionWalk = twoRows || target.pairsBlocks(op, shape);
  auto csrWalk = [&](LoopEmitter &e, const ProgramRows &rows, KvWalk &walk) {
    // The schedule keeps a program's tokens inside one layout row, or two.
    Value layoutRow = e.divU(rows.qposBase, e.idx(qBlockSize));
    Value layoutHead = perHead ? rows.headBase : e.idx(0);
    Value lo = walk.lo, hi = walk.hi;
    if (unionWalk) {
      Value qb = e.idx(qBlockSize);
      walk.secondRowToken =
          e.sub(e.mul(e.add(layoutRow, e.idx(1)), qb), rows.qposBase);
      Value lastRow =
          e.divU(e.sub(e.add(rows.qposBase, rows.numTokens), e.idx(1)), qb);
      RowPairLayout pair{crow,      col,     numRows, layoutHead,
                         layoutRow, lastRow, hi,      blockSize};
      walk.forEachBlockTile =
          [=](LoopEmitter &e, int64_t perTile,
              llvm::function_ref<void(Value, ArrayRef<SparseBlock>)> visit) {
            return walkRowPair(e, pair, perTile, visit);
          };
      return;
    }
    walk.forEachRange = [=](LoopEmitter &e,
                            llvm::function_ref<void(Value, Value)> visit) {
      // Rows past the layout select nothing (never read out of bounds).
      e.ifThen(e.lt(layoutRow, numRows), [&] {
        Value begin = e.loadIndex(crow, {layoutHead, layoutRow});
        Value end = e.loadIndex(crow, {layoutHead, e.add(layoutRow, e.idx(1))});
        e.forLoop(begin, end, [&](Value entry) {
          Value blockId = e.loadIndex(col, {layoutHead, entry});
          Value first = e.mul(blockId, e.idx(blockSize));
          visit(e.max(first, lo), e.min(e.add(first, e.idx(blockSize)), hi));
        });
      });
    };
  };
  emitDenseVarlen(e, target, op, shape, group, f, out, op.getQ(), op.getK(),
                  op.getV(), op.getCuSeqlensQ(), op.getCuSeqlensK(), Value(),
                  Value(), Value(), Type(), csrWalk);
}

struct LowerKernelOp : RewritePattern {
  LowerKernelOp(MLIRContext *ctx)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, ctx) {}
  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    if (!isa<AttnKernelOpInterface, MergeStatesOp>(op))
      return failure();
    ImplicitLocOpBuilder b(op->getLoc(), rewriter);
    LoopEmitter e(b);
    LoopProgramTarget target;
    if (failed(emitAttnOp(e, target, op)))
      return failure();
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

Value GridExtent::materialize(LoopEmitter &e, ValueRange operands) const {
  Value sum = e.idx(constant);
  for (const Term &t : terms) {
    Value dim = memref::DimOp::create(e.builder(), operands[t.operand], t.dim);
    sum = e.add(sum, t.divisor == 1 ? dim : e.divU(dim, e.idx(t.divisor)));
  }
  return sum;
}

llvm::json::Value GridExtent::toJson() const {
  llvm::json::Array termList;
  for (const Term &t : terms)
    termList.push_back(llvm::json::Array{t.operand, t.dim, t.divisor});
  return llvm::json::Object{{"terms", std::move(termList)}, {"add", constant}};
}

FailureOr<SmallVector<GridExtent>> mlir::attn::kernelGrid(Operation *op) {
  auto groupsOf = [&](int64_t heads) {
    return heads / scheduleOrDefault(op).getHeadsPerProgram();
  };
  auto blockQ = [&] { return scheduleOrDefault(op).getBlockQ(); };
  if (auto kernel = dyn_cast<AttnKernelOpInterface>(op))
    return varlenGrid(
        op, kernel.getQ(), kernel.getQueryOffsets(), blockQ(),
        groupsOf(kernel.getNumQueryHeads()), kernel.getGridSplits(),
        isa<UnifiedOp>(op) ? cast<UnifiedOp>(op).getOut() : Value());
  if (auto ms = dyn_cast<MergeStatesOp>(op)) {
    unsigned partial = operandIndex(op, ms.getPartial());
    GridExtent tokens, heads, one;
    // (One program past the last whole group: floor + 1 covers the ceiling;
    // its rows past the tokens do nothing.)
    tokens.terms = {{partial, 0, kMergeRowsPerProgram}};
    tokens.constant = 1;
    heads.terms = {{partial, 1, 1}};
    one.constant = 1;
    return SmallVector<GridExtent>{tokens, heads, one};
  }
  return failure();
}

namespace {
/// The kernel ops' lowerings, reached through AttnKernelOpInterface::accept.
struct KernelEmitter : AttnKernelVisitor {
  KernelEmitter(LoopEmitter &e, ProgramTarget &target) : e(e), target(target) {}
  void visit(PrefixPrefillOp op) override { emitPrefixPrefill(e, target, op); }
  void visit(UnifiedOp op) override { emitUnified(e, target, op); }
  void visit(FlashOp op) override { emitFlash(e, target, op); }
  void visit(BlockSparseOp op) override { emitBlockSparse(e, target, op); }
  LoopEmitter &e;
  ProgramTarget &target;
};
} // namespace

LogicalResult mlir::attn::emitAttnOp(LoopEmitter &e, ProgramTarget &target,
                                     Operation *op) {
  if (auto kernel = dyn_cast<AttnKernelOpInterface>(op)) {
    KernelEmitter emitter(e, target);
    kernel.accept(emitter);
    return success();
  }
  if (auto ms = dyn_cast<MergeStatesOp>(op)) {
    emitMergeStates(e, target, ms);
    return success();
  }
  return failure();
}

void mlir::attn::populateAttnToSCFPatterns(RewritePatternSet &patterns) {
  patterns.add<LowerKernelOp>(patterns.getContext());
}

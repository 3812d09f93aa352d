//===- LowerMergeStates.cpp - attn.merge_states -> programs -----*- C++ -*-===//
//
// docs/semantics.md, section 3.5: a grid over (tokens, head) whose programs
// rescale every segment by exp(m_s - M) and normalize once, a few rows a
// program (kMergeRowsPerProgram).
//
//===----------------------------------------------------------------------===//

#include "attn/Conversion/AttnToSCF/KernelLowering.h"
#include "attn/Conversion/Passes.h"
#include "attn/IR/AttnOps.h"

using namespace mlir;
using namespace mlir::attn;

/// Segments are read in groups of this many: every load of a group is
/// issued before its math, so that a merge of many segments (a decode of
/// one sequence split 32 ways) waits for memory once per group instead of
/// once per segment. (On H100, 2026-11-27: 16 took 0.6-0.8 us off the
/// 32-segment merge of a B=1 decode against 8, and left 4 segments level;
/// 32 cost 1% at 4 segments.)
static constexpr int64_t kSegmentGroup = 16;
/// The group of merges of at most this many segments.
static constexpr int64_t kFewSegments = 4;

/// exp(x), through the target's exp2: exp2(x * log2(e)).
static Value expNatural(LoopEmitter &e, Value x) {
  return e.exp2(e.mulF(x, e.f32(kLog2e)));
}

/// A max to subtract from the states' maxima: 0 where it is -inf (every
/// segment empty and no sink), whose weights are then exp(-inf) = 0.
static Value finiteMax(LoopEmitter &e, Value m) {
  return e.select(e.cmpF(arith::CmpFPredicate::OEQ, m, e.negInf()), e.f32(0.0),
                  m);
}

/// 1 / den (0 for an empty row), divided by the output scale if any.
static Value outputFactor(LoopEmitter &e, Value den, Value outScale) {
  Value inv = e.select(e.cmpF(arith::CmpFPredicate::OGT, den, e.f32(0.0)),
                       e.divF(e.f32(1.0), den), e.f32(0.0));
  return outScale ? e.divF(inv, outScale) : inv;
}

void mlir::attn::emitMergeStates(LoopEmitter &e, ProgramTarget &target,
                                 MergeStatesOp op) {
  ImplicitLocOpBuilder &b = e.builder();
  Value partial = op.getPartial();
  int64_t headDim = cast<MemRefType>(partial.getType()).getDimSize(3);
  bool lse = op.isLseForm();
  Value stat = lse ? op.getSegmentLse() : op.getSegmentMax();
  Value tokens = memref::DimOp::create(b, partial, 0);
  Value segments = memref::DimOp::create(b, partial, 2);
  Value outScale = op.getOutScale() ? e.loadScalar(op.getOutScale()) : Value();
  // A lane's elements: lane, lane + kMergeLanes, ... (the last clamped to
  // the row and its store skipped when the head dim is no multiple).
  int64_t perLane = (headDim + kMergeLanes - 1) / kMergeLanes;

  FailureOr<SmallVector<GridExtent>> extents = kernelGrid(op);
  SmallVector<Value> ubs;
  for (const GridExtent &x : *extents)
    ubs.push_back(x.materialize(e, op->getOperands()));
  auto program = [&](ValueRange iv) {
    Value h = iv[1];
    auto exp = [&](Value x) { return expNatural(e, x); };
    // Program p merges tokens [p * kMergeRowsPerProgram, ...) of head h,
    // one row per kMergeLanes lanes (a warp on NVIDIA): each segment of a
    // row is read by one contiguous load per lane group, and the weights
    // exp(m_s - M) are computed once a lane for all its elements.
    int64_t items = kMergeRowsPerProgram * kMergeLanes;
    target.spread(e, e.idx(0), e.idx(items), [&](Value item) {
      Value t = e.add(e.mul(iv[0], e.idx(kMergeRowsPerProgram)),
                      e.divU(item, e.idx(kMergeLanes)));
      Value lane = e.remU(item, e.idx(kMergeLanes));
      SmallVector<Value> dims;
      for (int64_t j = 0; j < perLane; ++j)
        dims.push_back(
            e.min(e.add(lane, e.idx(j * kMergeLanes)), e.idx(headDim - 1)));
      // Segments are read in groups of `group` (see kSegmentGroup): segment
      // i of group g is min(g * group + i, segments - 1), always in bounds,
      // the copies of the last one past the end counted once (max) or
      // weighted 0 (sums), so that a group's loads need no branch.
      auto merge = [&](int64_t group) {
        Value groups = e.ceilDiv(segments, e.idx(group));
        Value last = e.sub(segments, e.idx(1));
        auto groupSegments = [&](Value g) {
          SmallVector<std::pair<Value, Value>> members; // (segment, counted)
          for (int64_t i = 0; i < group; ++i) {
            Value s = e.add(e.mul(g, e.idx(group)), e.idx(i));
            members.push_back({e.min(s, last), e.le(s, last)});
          }
          return members;
        };
        Value globalMax =
            e.reduce(e.idx(0), groups, e.negInf(), [&](Value g, Value m) {
              SmallVector<Value> stats;
              for (auto [s, counted] : groupSegments(g))
                stats.push_back(e.load(stat, {t, h, s}));
              for (Value x : stats)
                m = e.maxF(m, x);
              return m;
            });
        Value sink = op.getSinks() ? e.load(op.getSinks(), {h}) : Value();
        if (sink)
          globalMax = e.maxF(globalMax, sink);
        Value safeMax = finiteMax(e, globalMax);
        // One pass over the segments for the denominator and the lane's
        // numerators together (after the max): a decode step's merge is a
        // chain of dependent loads per segment, so each pass costs latency.
        // Every element sums the same weights in the same order.
        SmallVector<Value> init(1 + perLane, e.f32(0.0));
        SmallVector<Value> sums = e.reduceN(
            e.idx(0), groups, init,
            [&](Value g, ValueRange acc) -> SmallVector<Value> {
              auto members = groupSegments(g);
              SmallVector<Value> stats, segSums, parts;
              for (auto [s, counted] : members) {
                stats.push_back(e.load(stat, {t, h, s}));
                if (!lse)
                  segSums.push_back(e.load(op.getSegmentSum(), {t, h, s}));
                for (Value d : dims)
                  parts.push_back(e.load32(partial, {t, h, s, d}));
              }
              SmallVector<Value> next(acc.begin(), acc.end());
              for (int64_t i = 0; i < group; ++i) {
                Value w = exp(e.subF(stats[i], safeMax));
                w = e.select(members[i].second, w, e.f32(0.0));
                next[0] = e.addF(next[0], lse ? w : e.mulF(w, segSums[i]));
                for (int64_t j = 0; j < perLane; ++j)
                  next[1 + j] =
                      e.addF(next[1 + j], e.mulF(w, parts[i * perLane + j]));
              }
              return next;
            });
        Value denom = sums[0];
        if (sink)
          denom = e.addF(denom, exp(e.subF(sink, safeMax)));
        Value inv = outputFactor(e, denom, outScale);
        for (int64_t j = 0; j < perLane; ++j) {
          auto store = [&] {
            e.storeOutput(e.mulF(sums[1 + j], inv), op.getOut(),
                          {t, h, dims[j]}, bool(outScale));
          };
          if ((j + 1) * kMergeLanes <= headDim)
            store();
          else
            e.ifThen(e.lt(e.add(lane, e.idx(j * kMergeLanes)), e.idx(headDim)),
                     store);
        }
      };
      // Few segments (context-parallel ranks and their pieces): groups of
      // kFewSegments, not kSegmentGroup copies of the same loads and
      // exponentials (a 2-segment merge of 256K tokens x 32 heads took
      // 34 ms on an H200: bench/results/2026-11-29-h200x2-cp-exchange.log).
      e.ifThen(e.lt(t, tokens), [&] {
        e.ifThenElse(
            e.le(segments, e.idx(kFewSegments)), [&] { merge(kFewSegments); },
            [&] { merge(kSegmentGroup); });
      });
    });
  };
  target.grid(e, ubs, program, /*kvBytesPerSequence=*/Value());
}

void mlir::attn::emitMergeRows(LoopEmitter &e, ProgramTarget &target,
                               const SegmentStates &states, Value numRows,
                               llvm::function_ref<MergeRow(Value row)> rowAt) {
  int64_t run = states.headDim % 4 == 0 ? 4 : states.headDim % 2 == 0 ? 2 : 1;
  int64_t runs = states.headDim / run;
  auto exp = [&](Value x) { return expNatural(e, x); };
  auto safe = [&](Value m) { return finiteMax(e, m); };
  Value groups = e.ceilDiv(states.segments, e.idx(kSegmentGroup));
  Value last = e.sub(states.segments, e.idx(1));
  target.spread(e, e.idx(0), e.mul(numRows, e.idx(runs)), [&](Value i) {
    MergeRow at = rowAt(e.divU(i, e.idx(runs)));
    Value t = at.stateRow, h = at.head, tok = at.outRow;
    Value d0 = e.mul(e.remU(i, e.idx(runs)), e.idx(run));
    // State: running max, denominator, the run's numerators; each group's
    // loads are issued before its math (see kSegmentGroup).
    SmallVector<Value> init{e.negInf(), e.f32(0.0)};
    init.append(run, e.f32(0.0));
    // A round of kSegmentGroup segments: all of them there (`whole`), or
    // the last round's, each past the end a copy of the last segment that
    // counts as empty.
    auto round = [&](Value g, ValueRange st, bool whole) -> SmallVector<Value> {
      SmallVector<Value> stats, sums, parts;
      Value first = e.mul(g, e.idx(kSegmentGroup));
      for (int64_t k = 0; k < kSegmentGroup; ++k) {
        Value s = e.add(first, e.idx(k));
        Value counted = whole ? Value() : e.le(s, last);
        if (!whole)
          s = e.min(s, last);
        Value m = e.load(states.segmentMax, {t, h, s});
        stats.push_back(whole ? m : e.select(counted, m, e.negInf()));
        sums.push_back(e.load(states.segmentSum, {t, h, s}));
        for (int64_t j = 0; j < run; ++j)
          parts.push_back(
              e.load32(states.partial, {t, h, s, e.add(d0, e.idx(j))}));
      }
      Value m = st[0];
      for (Value x : stats)
        m = e.maxF(m, x);
      Value base = safe(m);
      Value rescale = exp(e.subF(st[0], base));
      Value den = e.mulF(st[1], rescale);
      SmallVector<Value> num;
      for (int64_t j = 0; j < run; ++j)
        num.push_back(e.mulF(st[2 + j], rescale));
      for (int64_t k = 0; k < kSegmentGroup; ++k) {
        Value w = exp(e.subF(stats[k], base));
        den = e.addF(den, e.mulF(w, sums[k]));
        for (int64_t j = 0; j < run; ++j)
          num[j] = e.addF(num[j], e.mulF(w, parts[k * run + j]));
      }
      SmallVector<Value> next{m, den};
      next.append(num.begin(), num.end());
      return next;
    };
    // Whole rounds (a 32-segment merge's two) address each segment at a
    // constant offset from the round's first, where the target takes them
    // (SegmentStates::wholeRounds): on sm_90a the index arithmetic
    // and clamps were about two thirds of a round's 641 instructions
    // (bench/results/2026-12-01-h200-session30.md).
    SmallVector<Type> types(init.size(), e.builder().getF32Type());
    SmallVector<Value> acc =
        e.reduceN(e.idx(0), groups, init,
                  [&](Value g, ValueRange st) -> SmallVector<Value> {
                    if (!states.wholeRounds)
                      return round(g, st, false);
                    Value whole =
                        e.le(e.mul(e.add(g, e.idx(1)), e.idx(kSegmentGroup)),
                             states.segments);
                    return e.ifElse(
                        whole, types, [&] { return round(g, st, true); },
                        [&] { return round(g, st, false); });
                  });
    Value den = acc[1];
    SmallVector<Value> num(acc.begin() + 2, acc.end());
    Value base = safe(acc[0]); // what den is relative to
    if (states.sinks) {
      Value sink = e.load(states.sinks, {h});
      base = safe(e.maxF(acc[0], sink));
      Value rescale = exp(e.subF(acc[0], base));
      den = e.addF(e.mulF(den, rescale), exp(e.subF(sink, base)));
      for (Value &x : num)
        x = e.mulF(x, rescale);
    }
    // lse = base + ln den (-inf for a row of empty segments and no sink),
    // stored by the row's first run.
    if (states.lse)
      e.ifThen(e.eq(d0, e.idx(0)), [&] {
        e.store(e.addF(base, e.mulF(e.log2(den), e.f32(kLn2))), states.lse,
                {tok, h});
      });
    Value inv = outputFactor(e, den, states.outScale);
    for (int64_t j = 0; j < run; ++j)
      e.storeOutput(e.mulF(num[j], inv), states.out,
                    {tok, h, e.add(d0, e.idx(j))}, bool(states.outScale));
  });
}

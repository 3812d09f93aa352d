//===- TiledAttention.cpp - the target-independent attention program -----===//
//
// Scores live in the log2 domain: s2 = log2(e) * s, so the softmax uses exp2
// and log2(e) folds into the scale. The running max of a row starts at -inf
// (or at the row's sink), and is replaced by 0 while it is still -inf so that
// exp2(-inf - max) is 0 instead of NaN: a row that sees no key ends with a
// zero accumulator and a zero sum, and the epilogue writes 0.
//
//===----------------------------------------------------------------------===//

#include "attn/Conversion/AttnToSCF/TiledAttention.h"
#include "attn/Conversion/AttnToSCF/Fp8Codec.h"
#include "attn/Conversion/AttnToSCF/Philox.h"

#include <cmath>

using namespace mlir;
using namespace mlir::attn;

//===----------------------------------------------------------------------===//
// AttentionMath: the element-level semantics shared by every target.
//===----------------------------------------------------------------------===//

std::pair<Value, Value>
AttentionMath::visibleKeyRange(const ProgramRows &rows) {
  Value lastPos = e.sub(e.add(rows.qposBase, rows.numTokens), e.idx(1));
  Value lo = e.idx(0);
  // Bidirectional ranges may reveal keys outside the window and after the
  // row: such programs walk every key up to the walk's own end.
  bool ranges = bool(f.mmPrefixRange);
  if (f.chunkSize && !ranges) {
    // The first chunk the first row looks back to.
    Value c = e.idx(*f.chunkSize);
    Value first = e.sub(e.divU(rows.qposBase, c), e.idx(*f.chunkLookback));
    lo = e.max(lo, e.mul(first, c));
  } else if (f.window && !ranges) {
    lo = e.max(lo, e.sub(rows.qposBase, e.idx(*f.window - 1)));
  }
  // Without a causal mask every key up to the walk's own end is visible.
  bool causalEverywhere = f.causal && !f.causalFlags;
  Value hi = causalEverywhere && !ranges
                 ? e.add(lastPos, e.idx(1))
                 : e.idx(std::numeric_limits<int32_t>::max());
  return {lo, hi};
}

Value AttentionMath::tileFullyVisible(const ProgramRows &rows, Value n0,
                                      Value n1) {
  Value ok = e.boolean(true);
  // The first row has the smallest position, the last the largest. (With
  // per-sequence flags, tiles whole under the causal mask are whole either
  // way: the bidirectional masks only add keys.)
  if (f.causal || f.causalFlags)
    ok = e.andI(ok, e.le(e.sub(n1, e.idx(1)), rows.qposBase));
  Value lastPos = e.sub(e.add(rows.qposBase, rows.numTokens), e.idx(1));
  if (f.chunkSize) {
    Value c = e.idx(*f.chunkSize);
    ok = e.andI(ok, e.le(e.sub(e.divU(lastPos, c), e.divU(n0, c)),
                         e.idx(*f.chunkLookback)));
  } else if (f.window) {
    ok = e.andI(ok, e.lt(e.sub(lastPos, n0), e.idx(*f.window)));
    if (!f.causal)
      ok = e.andI(ok, e.lt(e.sub(e.sub(n1, e.idx(1)), rows.qposBase),
                           e.idx(*f.window)));
  }
  if (f.rswaPrefixLens) {
    // Every key in the prompt, or every key in every row's R-SWA window.
    Value prompt = e.loadIndex(f.rswaPrefixLens, {rows.batch});
    ok = e.andI(ok, e.orI(e.le(n1, prompt),
                          e.lt(e.sub(lastPos, n0), e.idx(*f.rswaWindow))));
  }
  // Bidirectional ranges only add visible pairs: a tile the other masks
  // leave whole stays whole.
  return ok;
}

Value AttentionMath::visible(const ProgramRows &rows, Value row, Value key) {
  Value tok = tokenOf(row);
  Value ok = e.lt(tok, rows.numTokens);
  Value qpos = e.add(rows.qposBase, tok);
  Value valid = ok;
  Value flag; // per-sequence: causal (true) or bidirectional
  if (f.causalFlags)
    flag = e.cmp(arith::CmpIPredicate::ne,
                 e.loadIndex(f.causalFlags, {rows.batch}), e.idx(0));
  if (f.causal)
    ok = e.andI(ok, e.le(key, qpos));
  else if (flag)
    ok = e.andI(ok, e.orI(e.le(key, qpos), e.notI(flag)));
  if (f.chunkSize) {
    Value c = e.idx(*f.chunkSize);
    ok = e.andI(ok, e.le(e.sub(e.divU(qpos, c), e.divU(key, c)),
                         e.idx(*f.chunkLookback)));
  } else if (f.window) {
    Value w = e.idx(*f.window);
    ok = e.andI(ok, e.lt(e.sub(qpos, key), w));
    // Bidirectional rows: also keys at most w - 1 after the row.
    Value ahead = e.lt(e.sub(key, qpos), w);
    if (flag)
      ok = e.andI(ok, e.orI(ahead, flag));
    else if (!f.causal)
      ok = e.andI(ok, ahead);
  }
  if (f.rswaPrefixLens) {
    Value prompt = e.loadIndex(f.rswaPrefixLens, {rows.batch});
    ok = e.andI(ok, e.orI(e.lt(key, prompt),
                          e.lt(e.sub(qpos, key), e.idx(*f.rswaWindow))));
  }
  if (f.mmPrefixRange) {
    // (lo, hi) pairs, both ends included; lo >= hi is padding. Keys past
    // the sequence are clipped by the walk.
    auto type = cast<MemRefType>(f.mmPrefixRange.getType());
    Value count =
        type.isDynamicDim(1)
            ? memref::DimOp::create(e.builder(), f.mmPrefixRange, 1).getResult()
            : e.idx(type.getDimSize(1));
    Value inRange =
        e.reduce(e.idx(0), count, e.boolean(false), [&](Value r, Value any) {
          Value lo = e.loadIndex(f.mmPrefixRange, {rows.batch, r, e.idx(0)});
          Value hi = e.loadIndex(f.mmPrefixRange, {rows.batch, r, e.idx(1)});
          auto within = [&](Value p) {
            return e.andI(e.le(lo, p), e.le(p, hi));
          };
          Value pair = e.andI(e.lt(lo, hi), e.andI(within(qpos), within(key)));
          if (f.mmClampWindow && f.window)
            pair = e.andI(pair, e.lt(e.sub(qpos, key), e.idx(*f.window)));
          return e.orI(any, pair);
        });
    ok = e.orI(ok, e.andI(valid, inRange));
  }
  return ok;
}

std::pair<Value, Value> AttentionMath::visibleColumns(const ProgramRows &rows,
                                                      Value row, Value n0,
                                                      Value nValid) {
  assert(intervalMasks() && "masks that are no interval of keys");
  // The row's position from n0: it sees column c under the causal mask iff
  // c <= d, under a window of w iff d - c < w (and c - d < w without the
  // causal mask).
  Value tok = tokenOf(row);
  Value d = e.sub(e.add(rows.qposBase, tok), n0);
  Value lo = e.idx(0), end = nValid;
  if (f.causal)
    end = e.min(end, e.add(d, e.idx(1)));
  if (f.window) {
    lo = e.max(lo, e.sub(d, e.idx(*f.window - 1)));
    if (!f.causal)
      end = e.min(end, e.add(d, e.idx(*f.window)));
  }
  Value span = e.select(e.lt(tok, rows.numTokens),
                        e.max(e.sub(end, lo), e.idx(0)), e.idx(0));
  // span <= nValid, and lo < nValid where span > 0 (elsewhere lo's bits do
  // not matter): both fit 32 bits.
  return {e.toI32(lo), e.toI32(span)};
}

Value AttentionMath::linearScoreFactor() {
  return e.mulF(f.scale, e.f32(kLog2e));
}

Value AttentionMath::alibiReference(const ProgramRows &rows, Value row) {
  if (!alibiByDistance())
    return {};
  if (f.alibiForm == AlibiForm::relative)
    return e.add(rows.qposBase, tokenOf(row));
  if (f.alibiForm == AlibiForm::context)
    return rows.ctx;
  return e.idx(0);
}

Value AttentionMath::score(const ProgramRows &rows, Value row, Value key,
                           Value dot, Value alibiDistance) {
  Value s;
  if (f.softcap) {
    // c * tanh(scale * qk / c) in the log2 domain: the factors scale / c
    // and c * log2(e) are per program, so an element takes no division.
    s = e.scaledTanh(dot, e.divF(f.scale, f.softcap),
                     e.mulF(f.softcap, e.f32(kLog2e)));
  } else {
    s = e.mulF(dot, linearScoreFactor());
  }
  if (!f.alibiSlopes && !f.bias && !f.qqBias)
    return s;
  Value head = headOf(rows, row);
  if (f.alibiSlopes) {
    Value d;
    if (f.alibiForm == AlibiForm::sqrt) {
      assert(!alibiDistance && "sqrt's distance is no i32");
      // -sqrt(qpos - kpos) for keys at or before the row, else 0.
      Value qpos = e.add(rows.qposBase, tokenOf(row));
      Value back = e.indexToF32(e.sub(qpos, key));
      d = e.select(e.le(key, qpos), e.subF(e.f32(0.0), e.sqrt(back)),
                   e.f32(0.0));
    } else if (alibiDistance) {
      d = arith::SIToFPOp::create(e.builder(), e.builder().getF32Type(),
                                  alibiDistance);
    } else {
      d = e.indexToF32(e.sub(key, alibiReference(rows, row)));
    }
    Value slope = e.load(f.alibiSlopes, {head});
    s = e.addF(s, e.mulF(e.mulF(slope, d), e.f32(kLog2e)));
  }
  if (f.qqBias) {
    // Keys of the query section, [ctx, ctx + cols), of rows [0, rows).
    auto type = cast<MemRefType>(f.qqBias.getType());
    auto dimOf = [&](unsigned i) -> Value {
      if (!type.isDynamicDim(i))
        return e.idx(type.getDimSize(i));
      return memref::DimOp::create(e.builder(), f.qqBias, i).getResult();
    };
    Value i = e.add(rows.seqRowBase, tokenOf(row));
    Value col = e.sub(key, rows.ctx);
    Value inside = e.andI(e.andI(e.le(rows.ctx, key), e.lt(col, dimOf(1))),
                          e.lt(i, dimOf(0)));
    Value bias = e.ifElse(
        inside, {e.builder().getF32Type()},
        [&] {
          return SmallVector<Value>{e.load32(f.qqBias, {i, col})};
        },
        [&] { return SmallVector<Value>{e.f32(0.0)}; })[0];
    s = e.addF(s, e.mulF(bias, e.f32(kLog2e)));
  }
  if (f.bias) {
    auto biasType = cast<MemRefType>(f.bias.getType());
    Value b = biasType.getDimSize(0) == 1 ? e.idx(0) : rows.batch;
    Value i = e.add(rows.seqRowBase, tokenOf(row));
    s = e.addF(s, e.mulF(e.load32(f.bias, {b, head, i, key}), e.f32(kLog2e)));
  }
  return s;
}

Value AttentionMath::dropoutKeep(const ProgramRows &rows, Value row,
                                 Value key) {
  // counter = offset + ((b * Hq + h) * Lq + i) * Lk + j, in i64.
  ImplicitLocOpBuilder &b = e.builder();
  auto i64 = [&](Value v) {
    return arith::IndexCastOp::create(b, b.getI64Type(), v).getResult();
  };
  Value i = e.add(rows.seqRowBase, tokenOf(row));
  Value bh =
      e.add(e.mul(rows.batch, e.idx(f.numQueryHeads)), headOf(rows, row));
  Value linear = e.add(e.mul(e.add(e.mul(bh, rows.lenQ), i), rows.lenK), key);
  Value counter = arith::AddIOp::create(b, f.philoxOffset, i64(linear));
  Value u = emitPhiloxUniform(e, f.philoxSeed, counter);
  return e.cmpF(arith::CmpFPredicate::OGT, u, f.dropoutP);
}

Value AttentionMath::probability(const ProgramRows &rows, Value row, Value key,
                                 Value p) {
  if (f.dropoutP)
    p = e.select(dropoutKeep(rows, row, key), p, e.f32(0.0));
  if (f.pScale) {
    // As the fp8 seed: P / p_scale rounded to v's fp8 type, times p_scale.
    ImplicitLocOpBuilder &b = e.builder();
    Value bits = emitF32ToFp8(b, f.pQuantType, e.divF(p, f.pScale));
    p = e.mulF(emitFp8ToF32(b, f.pQuantType, bits), f.pScale);
  }
  return p;
}

std::pair<Value, Value> AttentionMath::initialState(const ProgramRows &rows,
                                                    Value row) {
  if (!f.sinks)
    return {e.negInf(), e.f32(0.0)};
  // A sink is a virtual key with score sink[h] and no value.
  Value sink = e.load(f.sinks, {headOf(rows, row)});
  return {e.mulF(sink, e.f32(kLog2e)), e.f32(1.0)};
}

Value AttentionMath::safeMax(Value m) {
  return e.select(e.cmpF(arith::CmpFPredicate::OEQ, m, e.negInf()), e.f32(0.0),
                  m);
}

Value AttentionMath::outputFactor(Value l, Value outScale) {
  // l == 0 only when the row saw no key (and has no sink): output 0.
  Value inv = e.select(e.cmpF(arith::CmpFPredicate::OGT, l, e.f32(0.0)),
                       e.divF(e.f32(1.0), l), e.f32(0.0));
  if (f.dropoutP)
    inv = e.divF(inv, e.subF(e.f32(1.0), f.dropoutP));
  if (outScale)
    inv = e.divF(inv, e.loadScalar(outScale));
  return inv;
}

//===----------------------------------------------------------------------===//
// The CPU program.
//===----------------------------------------------------------------------===//

void TiledAttentionBuilder::emitProgram(const ProgramRows &rows,
                                        ArrayRef<KvWalk> walks) {
  int64_t bm = shape.rows(), bn = shape.blockN, d = shape.headDim;
  SmallVector<SmallVector<int64_t>> shapes = {
      {bm, d}, {bn, d}, {bn, d}, {bm, bn}, {bm, d}, {bm}, {bm}};
  e.withBuffers(shapes, [&](ArrayRef<Value> buffers) {
    qTile = buffers[0];
    kTile = buffers[1];
    vTile = buffers[2];
    sTile = buffers[3];
    acc = buffers[4];
    rowMax = buffers[5];
    rowSum = buffers[6];
    loadQueries(rows);
    initState(rows);
    for (const KvWalk &walk : walks) {
      if (!walk.forEachBlockTile) {
        walk.visitRanges(
            e, [&](Value lo, Value hi) { walkRange(rows, walk, lo, hi); });
        continue;
      }
      // A union walk: each block is a range that only the rows of the
      // layout rows listing it see.
      walk.forEachBlockTile(e, 1, [&](Value, ArrayRef<SparseBlock> slots) {
        const SparseBlock &block = slots.front();
        auto listed = [&](Value row) {
          return e.select(e.lt(math.tokenOf(row), walk.secondRowToken),
                          block.inFirstRow, block.inSecondRow);
        };
        walkRange(rows, walk, e.max(block.first, walk.lo),
                  e.add(block.first, block.valid), listed);
      });
    }
    epilogue(rows);
  });
}

void TiledAttentionBuilder::loadQueries(const ProgramRows &rows) {
  e.forLoop(0, shape.rows(), [&](Value m) {
    Value tok = math.tokenOf(m);
    Value valid = e.lt(tok, rows.numTokens);
    e.forLoop(0, shape.headDim, [&](Value dd) {
      e.store(e.f32(0.0), qTile, {m, dd});
    });
    e.ifThen(valid, [&] {
      Value qRow = e.add(rows.qTokBase, tok);
      Value head = math.headOf(rows, m);
      e.forLoop(0, shape.headDim, [&](Value dd) {
        e.store(e.load32(q, {qRow, head, dd}, rows.qScale, rows.qQuantize),
                qTile, {m, dd});
      });
    });
  });
}

void TiledAttentionBuilder::initState(const ProgramRows &rows) {
  e.forLoop(0, shape.rows(), [&](Value m) {
    auto [m0, l0] = math.initialState(rows, m);
    e.store(m0, rowMax, {m});
    e.store(l0, rowSum, {m});
    e.forLoop(0, shape.headDim, [&](Value dd) {
      e.store(e.f32(0.0), acc, {m, dd});
    });
  });
}

void TiledAttentionBuilder::walkRange(const ProgramRows &rows,
                                      const KvWalk &walk, Value lo, Value hi,
                                      RowMask listed) {
  Value bn = e.idx(shape.blockN);
  e.forLoop(lo, hi, bn, [&](Value n0) {
    tileStep(rows, walk, n0, e.min(bn, e.sub(hi, n0)), listed);
  });
}

void TiledAttentionBuilder::tileStep(const ProgramRows &rows,
                                     const KvWalk &walk, Value n0, Value nValid,
                                     RowMask listed) {
  int64_t d = shape.headDim;
  // Load: gather and dequantize the valid keys; zero the V rows past the end
  // so that masked (p = 0) columns never multiply garbage.
  e.forLoop(e.idx(0), nValid, [&](Value n) {
    KeyRow key = walk.locate(e, e.add(n0, n));
    e.forLoop(0, d, [&](Value dd) {
      e.store(e.load32(key.k, key.kAt(dd), key.kScale, key.quantize), kTile,
              {n, dd});
      e.store(e.load32(key.v, key.vAt(dd), key.vScale, key.quantize), vTile,
              {n, dd});
    });
  });
  e.forLoop(nValid, e.idx(shape.blockN), [&](Value n) {
    e.forLoop(0, d, [&](Value dd) { e.store(e.f32(0.0), vTile, {n, dd}); });
  });

  // QK, score mods and masks.
  e.forLoop(0, shape.rows(), [&](Value m) {
    e.forLoop(0, shape.blockN, [&](Value n) {
      Value key = e.add(n0, n);
      e.store(e.negInf(), sTile, {m, n});
      Value seen = e.andI(e.lt(n, nValid), math.visible(rows, m, key));
      if (listed)
        seen = e.andI(seen, listed(m));
      e.ifThen(seen, [&] {
        Value dot = e.reduce(0, d, e.f32(0.0), [&](Value dd, Value sum) {
          return e.addF(sum,
                        e.mulF(e.load(qTile, {m, dd}), e.load(kTile, {n, dd})));
        });
        e.store(math.score(rows, m, key, dot), sTile, {m, n});
      });
    });
  });

  // Online softmax update and PV, row by row.
  e.forLoop(0, shape.rows(), [&](Value m) {
    Value mOld = e.load(rowMax, {m});
    Value tileMax =
        e.reduce(0, shape.blockN, e.negInf(), [&](Value n, Value x) {
          return e.maxF(x, e.load(sTile, {m, n}));
        });
    Value mNew = e.maxF(mOld, tileMax);
    Value mSafe = math.safeMax(mNew);
    Value alpha = e.exp2(e.subF(mOld, mSafe));
    Value tileSum =
        e.reduce(0, shape.blockN, e.f32(0.0), [&](Value n, Value s) {
          Value p = e.exp2(e.subF(e.load(sTile, {m, n}), mSafe));
          e.store(p, sTile, {m, n});
          return e.addF(s, p);
        });
    e.store(e.addF(e.mulF(e.load(rowSum, {m}), alpha), tileSum), rowSum, {m});
    e.store(mNew, rowMax, {m});
    e.forLoop(0, d, [&](Value dd) {
      e.store(e.mulF(e.load(acc, {m, dd}), alpha), acc, {m, dd});
    });
    e.forLoop(e.idx(0), nValid, [&](Value n) {
      Value p = math.probability(rows, m, e.add(n0, n), e.load(sTile, {m, n}));
      e.forLoop(0, d, [&](Value dd) {
        e.store(e.addF(e.load(acc, {m, dd}), e.mulF(p, e.load(vTile, {n, dd}))),
                acc, {m, dd});
      });
    });
  });
}

void TiledAttentionBuilder::epilogue(const ProgramRows &rows) {
  e.forLoop(0, shape.rows(), [&](Value m) {
    Value tok = math.tokenOf(m);
    e.ifThen(e.lt(tok, rows.numTokens), [&] {
      Value qRow = e.add(rows.qTokBase, tok);
      Value head = math.headOf(rows, m);
      Value l = e.load(rowSum, {m});
      if (o.segmentMax) {
        // Split-KV partials, back in the natural-exp domain.
        Value pRow = e.add(rows.partialBase(), tok);
        Value mx = e.load(rowMax, {m});
        e.store(e.mulF(mx, e.f32(kLn2)), o.segmentMax,
                {pRow, head, rows.segment});
        e.store(l, o.segmentSum, {pRow, head, rows.segment});
        e.forLoop(0, shape.headDim, [&](Value dd) {
          e.store(e.load(acc, {m, dd}), o.out, {pRow, head, rows.segment, dd});
        });
        return;
      }
      if (o.lse) // back in the natural-log domain; -inf for an empty row
        e.store(e.mulF(e.addF(e.load(rowMax, {m}), e.log2(l)), e.f32(kLn2)),
                o.lse, {qRow, head});
      Value inv = math.outputFactor(l, o.outScale);
      e.forLoop(0, shape.headDim, [&](Value dd) {
        e.storeOutput(e.mulF(e.load(acc, {m, dd}), inv), o.out,
                      {qRow, head, dd}, bool(o.outScale));
      });
    });
  });
}

void LoopProgramTarget::grid(LoopEmitter &e, ArrayRef<Value> ubs,
                             llvm::function_ref<void(ValueRange)> body, Value) {
  ImplicitLocOpBuilder &b = e.builder();
  SmallVector<Value> lbs(ubs.size(), e.idx(0)), steps(ubs.size(), e.idx(1));
  auto par = scf::ParallelOp::create(b, lbs, ubs, steps);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(par.getBody()->getTerminator());
  body(par.getInductionVars());
}

void LoopProgramTarget::emitProgram(LoopEmitter &e, const TileShape &shape,
                                    const AttentionFeatures &f,
                                    const AttentionOutput &o, Value q,
                                    const ProgramRows &rows,
                                    ArrayRef<KvWalk> walks) {
  TiledAttentionBuilder(e, shape, f, o, q).emitProgram(rows, walks);
}

Value ProgramTarget::lastArrival(LoopEmitter &e, Value counters, ValueRange at,
                                 Value expected) {
  ImplicitLocOpBuilder &b = e.builder();
  Value old = memref::AtomicRMWOp::create(b, arith::AtomicRMWKind::addi,
                                          e.i32(1), counters, at);
  Value last = e.eq(old, e.toI32(e.sub(expected, e.idx(1))));
  // The counter is left 0 for the next launch: no program of this one
  // counts there again.
  e.ifThen(last, [&] { e.store(e.i32(0), counters, at); });
  return last;
}

Value ProgramTarget::searchLoop(
    LoopEmitter &e, Value n,
    llvm::function_ref<std::pair<Value, Value>(LoopEmitter &, Value, Value)>
        narrow) {
  ImplicitLocOpBuilder &b = e.builder();
  Type index = b.getIndexType();
  auto loop = scf::WhileOp::create(
      b, TypeRange{index, index}, ValueRange{e.idx(0), n},
      [&](OpBuilder &ob, Location loc, ValueRange args) {
        ImplicitLocOpBuilder ib(loc, ob);
        LoopEmitter ie(ib);
        Value more = ie.lt(ie.add(args[0], ie.idx(1)), args[1]);
        scf::ConditionOp::create(ib, more, args);
      },
      [&](OpBuilder &ob, Location loc, ValueRange args) {
        ImplicitLocOpBuilder ib(loc, ob);
        LoopEmitter ie(ib);
        auto [lo, hi] = narrow(ie, args[0], args[1]);
        scf::YieldOp::create(ib, ValueRange{lo, hi});
      });
  return loop.getResult(0);
}

Value ProgramTarget::searchLast(
    LoopEmitter &e, Value n, Value x,
    llvm::function_ref<Value(LoopEmitter &, Value)> key) {
  return searchLoop(e, n, [&](LoopEmitter &ie, Value lo, Value hi) {
    Value mid = ie.divU(ie.add(lo, hi), ie.idx(2));
    Value right = ie.le(key(ie, mid), x);
    return std::make_pair(ie.select(right, mid, lo), ie.select(right, hi, mid));
  });
}

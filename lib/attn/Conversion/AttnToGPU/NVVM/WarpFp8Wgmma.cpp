//===- WarpFp8Wgmma.cpp - fp8 flash on fp8 wgmma (sm_90a) -----------------===//
//
// attn.flash over fp8 Q, K and V on the warp-specialized pipeline
// (WarpSpecialized.cpp) with fp8 wgmma (m64nNk32, QGMMA), after
// FlashAttention-3's fp8 path:
//
// * Q and K tiles are loaded by TMA as stored (128 fp8 of a row: one
//   128-byte swizzle atom; heads of 64 fill half of it, the box reading
//   zeros past the head, which QK does not multiply) and multiplied as
//   they are; q_scale * k_scale scales the dot products.
// * fp8 wgmma reads B only K-major, and V [keys, D] is N-major for PV: the
//   producer warpgroup loads each raw V tile by TMA one tile ahead and
//   transposes it into V^T ([D, keys], 128-byte swizzled): ldmatrix, two
//   byte permutes per register, stmatrix.trans (heads of 128 and 256), or
//   32-bit loads, permutes and stores (heads of 64; transposeValues).
//   Pinned tiles of more than 128 keys (heads of 128, up to 224) keep
//   V^T in atoms of 128 keys; the plan takes 128 (fp8WgmmaKeys).
// * P's A registers need 4 adjacent keys of a row per register, where the
//   S accumulator holds pairs: keys 2t, 2t + 1 and 2t + 8, 2t + 9 of each
//   16 (t the lane's quad column). Instead of trading values between lanes,
//   V^T stores its keys in an order that puts exactly those four keys in
//   each 4-byte word (byte 16h + 2r + e of a 32-key step holds key 16h + r
//   + 8e as the matrices transpose, 16h + 2t + {0, 1, 8, 9}[i] at byte
//   16h + 4t + i as the words do), so that each register packs the lane's
//   own four values (packP8).
// * P is scaled by 1 / |p_scale| in the exponent, quantized with
//   cvt.rn.satfinite (round to nearest even, saturating, as the seed's
//   P / p_scale rounding), and |p_scale| * v_scale multiplies the output
//   (accumulatorScale); the row sums are kept in the true units.
//
//===----------------------------------------------------------------------===//

#include "WarpProgram.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

using namespace mlir;
using namespace mlir::attn;

namespace mlir::attn::warp {

namespace {
/// The keys of a 4-byte word of V^T written by words (heads of 64),
/// relative to 16h + 2t (see transposeValuesByWords).
constexpr int64_t kWordKeys[4] = {0, 1, 8, 9};

/// prmt.b32: the bytes of (hi:lo) that `selector`'s nibbles pick.
Value permuteBytes(ImplicitLocOpBuilder &b, Value lo, Value hi,
                   uint32_t selector) {
  char text[40];
  snprintf(text, sizeof(text), "prmt.b32 $0, $1, $2, 0x%04x;", selector);
  return inlinePtx(b, b.getI32Type(), ValueRange{lo, hi}, text, "=r,r,r",
                   /*sideEffects=*/false);
}

/// The same with the selector in a register (lanes differ).
Value permuteBytesBy(ImplicitLocOpBuilder &b, Value lo, Value hi,
                     Value selector) {
  return inlinePtx(b, b.getI32Type(), ValueRange{lo, hi, selector},
                   "prmt.b32 $0, $1, $2, $3;", "=r,r,r,r",
                   /*sideEffects=*/false);
}

/// The transposes' 32-bit shared-address arithmetic (index arithmetic is
/// 64-bit: twice the instructions on the producer's critical path).
struct I32Ops {
  LoopEmitter &e;
  ImplicitLocOpBuilder &b = e.builder();
  Value c(int64_t v) const { return e.i32(v); }
  Value of(Value index) const { return e.toI32(index, /*isSigned=*/false); }
  Value add(Value x, Value y) const { return arith::AddIOp::create(b, x, y); }
  Value mul(Value x, int64_t y) const {
    return arith::MulIOp::create(b, x, c(y));
  }
  Value orI(Value x, Value y) const { return arith::OrIOp::create(b, x, y); }
  Value xorI(Value x, Value y) const { return arith::XOrIOp::create(b, x, y); }
  Value xorC(Value x, int64_t y) const { return xorI(x, c(y)); }
  Value andC(Value x, int64_t y) const {
    return arith::AndIOp::create(b, x, c(y));
  }
  Value shl(Value x, int64_t y) const {
    return arith::ShLIOp::create(b, x, c(y));
  }
  Value shr(Value x, int64_t y) const {
    return arith::ShRUIOp::create(b, x, c(y));
  }
};

} // namespace

SharedTile WarpAttentionBuilder::transposedValues(Value stage) {
  // Past the K/V ring, one V^T per buffer (fp8WgmmaGeometry; warpLaunchFor
  // reserves them).
  // Tiles of more than 128 keys: atoms of 128 keys dPad rows apart.
  int64_t ctBytes = ct.getIntOrFloatBitWidth() / 8;
  int64_t vtElems = transposedValueBytes(g) / ctBytes;
  SharedTile t;
  t.offset = e.add(e.idx(g.mRows * g.stride + g.stages * g.kvElems()),
                   e.mul(stage, e.idx(vtElems)));
  t.rows = g.dPad;
  t.layout = TileLayout::Swizzled;
  t.mem = view(t.offset, transposedValueBytes(g) / wgmma::kAtomRowBytes,
               wgmma::kAtomRowBytes / ctBytes);
  return t;
}

void WarpAttentionBuilder::transposeValuesByMatrices(const SharedTile &raw,
                                                     const SharedTile &vt) {
  // Producer warp w transposes keys [32w, 32w + 32) of the tile, 16 dims
  // (one 16-byte chunk c of the raw rows) a round:
  // * ldmatrix.x4: matrix m is keys 32w + 8m .. + 7 at chunk c, its row
  //   (key 32w + lane) addressed by lane 8m + i; lane (r, q) = (lane / 4,
  //   lane % 4) receives dims 16c + 4q .. + 3 of keys 32w + 8m + r in R_m.
  // * Two byte permutes a key half b give the b16 pairs that
  //   stmatrix.x4.trans writes: matrix (a, b) (a: dims 4q + 2a, 4q + 2a +
  //   1) holds, at V^T row d and 2-byte column r of chunk 2w + b, keys
  //   (16b + r, 16b + 8 + r) of the step: byte 16b + 2r + e of a 32-key
  //   step is key 16b + r + 8e (packP8 packs P in that order).
  // The rows' 128-byte swizzle (chunk ^ row % 8) makes each ldmatrix
  // matrix conflict-free (8 keys, 8 chunks), and each stmatrix one (see
  // below). Per 512 bytes a warp issues one ldmatrix, four permutes and
  // one stmatrix (against 4 + 8 + 4 of 32-bit loads, permutes and stores
  // by words). Shared addresses are 32-bit with the round's offset as an
  // immediate (the upstream ops take 64-bit pointers: more registers than
  // the producer's 24 beside heads of 256).
  // Tiles of more than 128 keys (heads of 128): warp w also takes steps w
  // + 4, w + 8 .., each in the next V^T atom of 128 keys.
  assert(g.bn % 32 == 0 && kProducerWarps == 4 &&
         (g.bn == 128 || (g.bn <= 224 && g.dPad == 128)) &&
         (g.dPad == 128 || g.dPad == 256) &&
         "warps of 32-key steps; V^T rows of 128-byte atoms");
  I32Ops o{e};
  Type i32 = b.getI32Type();
  Value ptid = o.andC(o.of(tid), kProducerWarps * kLanes - 1);
  Value step = o.shr(ptid, 5), lane = o.andC(ptid, kLanes - 1);
  // ldmatrix: key 32 step + lane at byte 128 key, its chunk c at
  // (c ^ key % 8) * 16; tiles are 1024-byte aligned, so the lane's chunk
  // bits (4-6) take c by an XOR.
  Value loadAt = o.add(
      o.of(tileAddress(raw, 0)),
      o.add(o.shl(o.add(o.shl(step, 5), lane), 7), o.shl(o.andC(lane, 7), 4)));
  // stmatrix: lane 8M + j, M = a + 2b, addresses row j of matrix M: V^T
  // row d = 4 (j / 2) + 2a + j % 2 (+ 16c), chunk 2 step + b, swizzled by
  // d % 8.
  // Lanes q >= 2 swap their a = 0 and a = 1 registers (the byte permutes'
  // selectors are per lane), so that matrix (a', b) holds dims 4q + 2 (a'
  // ^ q / 2) + e: eight dims with distinct d % 8, so eight distinct
  // swizzled chunks, and no bank conflict (dims 4q + 2a + e would span 16
  // with two of each d % 8: two wavefronts a matrix).
  Value j = o.andC(lane, 7), m = o.shr(lane, 3);
  Value d = o.add(
      o.add(o.shl(o.shr(j, 1), 2), o.shl(o.xorI(o.andC(m, 1), o.shr(j, 2)), 1)),
      o.andC(j, 1));
  Value chunk = o.add(o.shl(step, 1), o.shr(m, 1));
  Value swapped = o.shr(o.andC(lane, 3), 1);
  Value selectLow = o.add(o.c(0x5140), o.mul(swapped, 0x2222));
  Value selectHigh = o.xorI(selectLow, o.c(0x5140 ^ 0x7362));
  Value storeAt =
      o.add(o.of(tileAddress(vt, 0)),
            o.add(o.shl(d, 7), o.shl(o.xorI(chunk, o.andC(d, 7)), 4)));
  Type quad = LLVM::LLVMStructType::getLiteral(b.getContext(),
                                               SmallVector<Type>(4, i32));
  // One round: chunk c of the raw rows (of the atom at `load`) to V^T rows
  // 16c .. 16c + 15 (of the atom at `store`).
  auto round = [&](Value load, Value store, int64_t c) {
    Value loaded = inlinePtx(
        b, quad, ValueRange{c ? o.xorI(load, o.c(c << 4)) : load},
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {$0, $1, $2, $3}, [$4];",
        "=r,=r,=r,=r,r");
    Value r[4];
    for (int64_t i = 0; i < 4; ++i)
      r[i] = LLVM::ExtractValueOp::create(b, loaded, i);
    // Register (a, b): bytes (R_2b[2a], R_2b+1[2a], R_2b[2a+1],
    // R_2b+1[2a+1]): selector 0x5140 for a = 0, 0x7362 for a = 1.
    Value pairs[4] = {permuteBytesBy(b, r[0], r[1], selectLow),
                      permuteBytesBy(b, r[0], r[1], selectHigh),
                      permuteBytesBy(b, r[2], r[3], selectLow),
                      permuteBytesBy(b, r[2], r[3], selectHigh)};
    inlinePtx(b, Type(),
              ValueRange{store, pairs[0], pairs[1], pairs[2], pairs[3]},
              "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [$0+" +
                  std::to_string(16 * c * wgmma::kAtomRowBytes) +
                  "], {$1, $2, $3, $4};",
              "r,r,r,r,r");
  };
  // Heads of 128: the eight rounds unrolled. Heads of 256: raw rows of two
  // atoms (bn rows apart), one loop iteration each, so that ptxas keeps the
  // rounds of one atom in flight within the producer's 24 registers (all
  // sixteen spilled).
  int64_t atoms = g.dPad / wgmma::kAtomRowBytes;
  if (atoms == 1) {
    int64_t steps = g.bn / 32;
    for (int64_t k = 0; 4 * k < steps; ++k) {
      // Step 4k + w: 128 keys on in the raw rows, one V^T atom on.
      Value load = o.add(loadAt, o.c(4 * k * 32 * wgmma::kAtomRowBytes));
      Value store = o.add(storeAt, o.c(k * g.dPad * wgmma::kAtomRowBytes));
      auto rounds = [&] {
        for (int64_t c = 0; c < g.dPad / 16; ++c)
          round(load, store, c);
      };
      // (A warp-uniform branch: the last atom's steps of fewer warps.)
      if (4 * (k + 1) <= steps)
        rounds();
      else
        e.ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::ult, step,
                                       o.c(steps - 4 * k)),
                 rounds);
    }
    return;
  }
  e.forLoop(0, atoms, [&](Value atom) {
    Value a = o.of(atom);
    Value load = o.add(loadAt, o.mul(a, g.bn * wgmma::kAtomRowBytes));
    Value store = o.add(storeAt, o.mul(a, 128 * wgmma::kAtomRowBytes));
    for (int64_t c = 0; c < 8; ++c)
      round(load, store, c);
  });
}

void WarpAttentionBuilder::transposeValues(const SharedTile &raw,
                                           const SharedTile &vt) {
  if (transposesByMatrices())
    return transposeValuesByMatrices(raw, vt);
  transposeValuesByWords(raw, vt);
}

void WarpAttentionBuilder::transposeValuesByWords(const SharedTile &raw,
                                                  const SharedTile &vt) {
  // The tiles as rows of 32 words (128 bytes), chunk c of row r at chunk
  // c ^ (r % 8). Lane (x, t) = (lane / 4, lane % 4) of a producer warp
  // writes V^T word 4x + t of a row (keys 16x + 2t + {0, 1, 8, 9}): the 8
  // x are 8 distinct chunks of the row, so a warp's stores of a 4-byte
  // word to one row each hit 32 banks. In round i the lane reads dims
  // 4W .. 4W + 3 of its four keys, W = (8 warp + i + x) % 32: the lanes'
  // rows differ in key % 8 or in W / 4, so their reads hit 32 banks too.
  // 32-bit shared addresses throughout (index arithmetic is 64-bit, twice
  // the instructions of the producer's critical path), the swizzles as
  // XORs of byte offsets with per-lane constants. Heads of 64 (the only
  // ones this serves): the raw rows' first 16 words, W = (4 warp + i + x)
  // % 16; W and W ^ 8 of the lanes' 8 consecutive W still cover 32 banks.
  assert(g.bn == 128 && g.dPad == 64 && "V^T rows of one 128-byte atom");
  I32Ops o{e};
  Type i32 = b.getI32Type();
  // (Words of a raw row's dims; each V^T row is 32 words of keys.)
  int64_t words = g.dPad / 4;
  Value rawBase = o.of(tileAddress(raw, 0)), vtBase = o.of(tileAddress(vt, 0));
  Value ptid = o.andC(o.of(tid), kProducerWarps * kLanes - 1);
  Value x = o.andC(o.shr(ptid, 2), 7), t = o.andC(ptid, 3);
  // The lane's first key row of the raw tile (a byte address; the other
  // three are immediate offsets from it, which keeps the producer within
  // its 24 registers), and the swizzle of each: byte
  // 4W of row key lies at 4W ^ (key % 8) * 16, key % 8 = 2t + c % 2.
  Value key0 = o.add(o.shl(x, 4), o.shl(t, 1));
  Value row0 = o.add(rawBase, o.shl(key0, 7));
  Value rowSwizzle = o.shl(t, 5);
  // V^T word 4x + t of row d: byte 16 (x ^ d % 8) + 4t of the row, that is
  // (16x + 4t) ^ 16 (d % 8).
  Value laneWord = o.orI(o.shl(x, 4), o.shl(t, 2));
  // One round at a time (the producer has 24 registers beside three
  // consumer warpgroups).
  int64_t rounds = words / kProducerWarps;
  Value first =
      e.mul(e.divU(e.remU(tid, e.idx(kProducerWarps * kLanes)), e.idx(kLanes)),
            e.idx(rounds));
  e.forLoop(first, e.add(first, e.idx(rounds)), [&](Value i0) {
    Value w = o.andC(o.add(o.of(i0), x), words - 1);
    // (The swizzle XORs bits 4-6 of the byte in the row's atom.)
    Value wordBytes = o.shl(o.andC(w, 31), 2);
    Value cols[2] = {o.xorI(wordBytes, rowSwizzle),
                     o.xorI(wordBytes, o.xorC(rowSwizzle, 16))};
    Value at[2] = {o.add(row0, cols[0]), o.add(row0, cols[1])};
    Value r[4];
    for (int64_t c = 0; c < 4; ++c)
      r[c] = inlinePtx(b, i32, ValueRange{at[c % 2]},
                       "ld.shared.b32 $0, [$1+" +
                           std::to_string(kWordKeys[c] * 128) + "];",
                       "=r,r");
    // 4 x 4 bytes: out[j] = byte j of r[0], r[1], r[2], r[3].
    Value lo01 = permuteBytes(b, r[0], r[1], 0x5140);
    Value hi01 = permuteBytes(b, r[0], r[1], 0x7362);
    Value lo23 = permuteBytes(b, r[2], r[3], 0x5140);
    Value hi23 = permuteBytes(b, r[2], r[3], 0x7362);
    Value out[4] = {permuteBytes(b, lo01, lo23, 0x5410),
                    permuteBytes(b, lo01, lo23, 0x7632),
                    permuteBytes(b, hi01, hi23, 0x5410),
                    permuteBytes(b, hi01, hi23, 0x7632)};
    // Row d = 4W + j at byte 128 d; d % 8 = 4 (W % 2) + j.
    Value dRows = o.add(vtBase, o.shl(w, 9));
    Value inRow = o.xorI(laneWord, o.shl(o.andC(w, 1), 6));
    for (int64_t j = 0; j < 4; ++j)
      inlinePtx(
          b, Type(), ValueRange{o.add(dRows, o.xorC(inRow, 16 * j)), out[j]},
          "st.shared.b32 [$0+" + std::to_string(128 * j) + "], $1;", "r,r");
  });
}

void WarpAttentionBuilder::produceTransposed(
    const KvWalk &walk, llvm::function_ref<void()> issueQuery) {
  // Tile t's raw V lands on kRawValueBarrier + t % 2 in buffer t % 2,
  // loaded while tile t - 1 is transposed; V^T(t) is released on fullV
  // once every producer thread has written and fenced its part.
  Value lo = walk.lo, hi = walk.hi, bn = e.idx(g.bn);
  Value leader = e.eq(tid, e.idx(consumerThreads()));
  auto rawFull = [&](Value s) { return e.add(e.idx(kRawValueBarrier), s); };
  auto loadRaw = [&](Value n0, Value s) {
    nvgpu::MBarrierArriveExpectTxOp::create(b, bars, e.idx(tileBytes(g.bn)),
                                            rawFull(s), Value());
    issueTmaBoxes(walk, kvBuffers(s).v, vMap, rawFull(s), n0);
  };
  e.ifThen(e.andI(leader, e.lt(lo, hi)), [&] { loadRaw(lo, e.idx(0)); });
  e.forLoop(lo, hi, bn, [&](Value n0) {
    Value t = e.divU(e.sub(n0, lo), bn);
    Value s = e.remU(t, e.idx(2));
    Value next = e.add(n0, bn);
    KvBuffers buf = kvBuffers(s);
    e.ifThen(leader, [&] {
      // The other buffer's raw V (tile t - 1) was transposed before the
      // last producer barrier.
      e.ifThen(e.lt(next, hi), [&] { loadRaw(next, e.sub(e.idx(1), s)); });
      awaitFree(emptyK(s), t);
      nvgpu::MBarrierArriveExpectTxOp::create(b, bars, e.idx(tileBytes(g.bn)),
                                              fullK(s), Value());
      issueTmaBoxes(walk, buf.k, kMap, fullK(s), n0);
      e.ifThen(e.eq(t, e.idx(0)), issueQuery);
    });
    waitBarrier(rawFull(s), parityOf(t));
    awaitFree(emptyV(s), t);
    transposeValues(buf.v, transposedValues(s));
    // Generic-proxy writes that wgmma reads through the async proxy.
    wgmma::fenceProxyAsync(b);
    syncProducer();
    e.ifThen(leader,
             [&] { nvgpu::MBarrierArriveOp::create(b, bars, fullV(s)); });
  });
  e.ifThen(e.andI(leader, e.le(hi, lo)), issueQuery);
}

void WarpAttentionBuilder::loadFp8Scales() {
  // (fp8 q, k and v require all four scales: the verifier.)
  dotScale = e.mulF(reloaded(qScaleAtEntry), reloaded(kScaleAtEntry));
  Value p = reloaded(f.pScale);
  pScaleAbs = e.maxF(p, arith::NegFOp::create(b, p));
  pScaleLog2 = e.log2(pScaleAbs);
  // (The sign of p_scale cancels: P / p_scale rounds symmetrically.)
  accumulatorScale = e.mulF(pScaleAbs, reloaded(vScaleAtEntry));
}

SmallVector<Value> WarpAttentionBuilder::packP8(ArrayRef<Value> p) {
  // Key step kk (S tiles 4kk .. 4kk + 3, accumulator order: element i of
  // tile j at 4j + i, rows quadRow + 8 (i / 2)): register 0 is row quadRow
  // of tiles 4kk and 4kk + 1, register 1 row quadRow + 8 of those, 2 and 3
  // the same of tiles 4kk + 2 and 4kk + 3, each in V^T's key order: keys
  // 2t, 2t + 8, 2t + 1, 2t + 9 of the 16 (transposeValuesByMatrices), or
  // 2t, 2t + 1, 2t + 8, 2t + 9 (transposeValuesByWords).
  // cvt packs its second operand into the low byte.
  auto cvt4 = [&](Value x0, Value x1, Value x2, Value x3) {
    std::string type = isa<Float8E4M3FNType>(vType) ? "e4m3x2" : "e5m2x2";
    std::string text = "{\n.reg .b16 lo, hi;\ncvt.rn.satfinite." + type +
                       ".f32 lo, $2, $1;\ncvt.rn.satfinite." + type +
                       ".f32 hi, $4, $3;\nmov.b32 $0, {lo, hi};\n}";
    return inlinePtx(b, b.getI32Type(), ValueRange{x0, x1, x2, x3}, text,
                     "=r,f,f,f,f", /*sideEffects=*/false);
  };
  SmallVector<Value> regs;
  for (size_t j = 0; j + 3 < p.size() / 4; j += 4) {
    auto at = [&](size_t tile, int64_t i) { return p[4 * tile + i]; };
    for (size_t pair : {j, j + 2})
      for (int64_t h : {0, 2})
        regs.push_back(transposesByMatrices()
                           ? cvt4(at(pair, h), at(pair + 1, h), at(pair, h + 1),
                                  at(pair + 1, h + 1))
                           : cvt4(at(pair, h), at(pair, h + 1), at(pair + 1, h),
                                  at(pair + 1, h + 1)));
  }
  return regs;
}

} // namespace mlir::attn::warp

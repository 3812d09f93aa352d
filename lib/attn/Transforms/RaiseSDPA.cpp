//===- RaiseSDPA.cpp - attn-raise-sdpa: linalg attention to attn.flash ----===//
//
// Recognises scaled dot-product attention written with upstream linalg ops on
// tensors and rewrites it into attn.flash when the two compute the same
// function (docs/raising.md states the conditions). The matcher walks back
// from the P.V contraction; every check that fails leaves the IR untouched.
//
//===----------------------------------------------------------------------===//

#include "attn/IR/AttnDialect.h"
#include "attn/IR/AttnOps.h"
#include "attn/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNRAISESDPA
#include "attn/Transforms/Passes.h.inc"
} // namespace mlir::attn

using namespace mlir;
using namespace mlir::attn;

namespace {

/// What the matcher found; ops are erased after the rewrite when dead.
struct Sdpa {
  Value q, k, v;
  Value bias;          // [B, S, Sk] or [S, Sk] (broadcast over the batch)
  double scale = 1.0;  // score multiplier
  bool causal = false; // bottom-right, as attn.flash defines it
  Operation *root = nullptr;
  SmallVector<Operation *> ops; // matched ops, producers last
  int64_t rank = 0;             // 3: [B, S, D]; 2: [S, D]
  bool scaleSeen = false;       // the last step matched was the scale
};

bool isF32(Value v) { return getElementTypeOrSelf(v.getType()).isF32(); }

bool hasUses(Value v, unsigned n) {
  return static_cast<unsigned>(std::distance(v.use_begin(), v.use_end())) == n;
}

/// The float constant `v` is (a scalar, or a splat tensor).
std::optional<APFloat> floatConstant(Value v) {
  FloatAttr f;
  if (matchPattern(v, m_Constant(&f)))
    return f.getValue();
  DenseFPElementsAttr d;
  if (matchPattern(v, m_Constant(&d)) && d.isSplat())
    return d.getSplatValue<APFloat>();
  return std::nullopt;
}

/// The value every element of `init` holds: a linalg.fill of a constant or a
/// constant splat tensor.
std::optional<APFloat> fillValue(Value init) {
  if (auto fill = init.getDefiningOp<linalg::FillOp>())
    return floatConstant(fill.getInputs()[0]);
  return floatConstant(init);
}

/// A block argument of the payload, seen through an extension to f32.
BlockArgument argThroughExt(Value v) {
  if (auto ext = v.getDefiningOp<arith::ExtFOp>())
    v = ext.getIn();
  return dyn_cast<BlockArgument>(v);
}

/// The value the payload yields.
Value yielded(linalg::LinalgOp op) {
  return op.getBlock()->getTerminator()->getOperand(0);
}

/// A linalg op computing one tensor elementwise over `rank` parallel loops:
/// its output map is the identity and the payload ignores the output's old
/// value.
bool isElementwise(linalg::LinalgOp op, int64_t rank) {
  if (!op || !op.hasPureTensorSemantics() || op->getNumResults() != 1 ||
      op.getNumLoops() != static_cast<unsigned>(rank) ||
      op.getNumParallelLoops() != op.getNumLoops() || op.getNumDpsInits() != 1)
    return false;
  OpOperand *init = op.getDpsInitOperand(0);
  return op.getMatchingIndexingMap(init).isIdentity() &&
         !op.payloadUsesValueFromOperand(init) &&
         op.getBlock()->getTerminator()->getNumOperands() == 1;
}

/// A reduction over the last of `rank` loops into a tensor of rank - 1,
/// reading `input` whole; returns the payload's combining op.
Operation *lastDimReduction(linalg::LinalgOp op, int64_t rank, Value input) {
  if (!op || !op.hasPureTensorSemantics() || op->getNumResults() != 1 ||
      op.getNumLoops() != static_cast<unsigned>(rank) ||
      op.getNumDpsInputs() != 1 || op.getNumDpsInits() != 1 ||
      op.getDpsInputOperand(0)->get() != input)
    return nullptr;
  SmallVector<utils::IteratorType> it = op.getIteratorTypesArray();
  for (int64_t d = 0; d < rank; ++d)
    if ((it[d] == utils::IteratorType::reduction) != (d == rank - 1))
      return nullptr;
  MLIRContext *ctx = op.getContext();
  SmallVector<AffineExpr> kept;
  for (int64_t d = 0; d + 1 < rank; ++d)
    kept.push_back(getAffineDimExpr(d, ctx));
  if (!op.getMatchingIndexingMap(op.getDpsInputOperand(0)).isIdentity() ||
      op.getMatchingIndexingMap(op.getDpsInitOperand(0)) !=
          AffineMap::get(rank, 0, kept, ctx))
    return nullptr;
  Operation *combine = yielded(op).getDefiningOp();
  if (!combine || combine->getNumOperands() != 2)
    return nullptr;
  Block *body = op.getBlock();
  Value in = body->getArgument(0), acc = body->getArgument(1);
  Value a = combine->getOperand(0), b = combine->getOperand(1);
  if (!((a == in && b == acc) || (a == acc && b == in)))
    return nullptr;
  return combine;
}

/// The map of operand `operand` of an op with `rank` loops, as a row/column
/// broadcast: the identity, or (for rank 3) the map dropping the batch.
enum class Broadcast { none, batch, other };
Broadcast broadcastOf(AffineMap map, int64_t rank) {
  if (map.isIdentity())
    return Broadcast::none;
  MLIRContext *ctx = map.getContext();
  if (rank == 3 &&
      map ==
          AffineMap::get(
              3, 0, {getAffineDimExpr(1, ctx), getAffineDimExpr(2, ctx)}, ctx))
    return Broadcast::batch;
  return Broadcast::other;
}

/// A contraction `out[b, m, n] = sum_r lhs[...] * rhs[...]` over f32 (inputs
/// possibly extended to it) into a zero-filled f32 init. `transposedRhs`
/// selects rhs[b, n, r] (Q.K^T) over rhs[b, r, n] (P.V). Batch dims are
/// absent when rank is 2. Loops may come in any order.
bool isContraction(linalg::LinalgOp op, int64_t rank, bool transposedRhs) {
  if (!op || !op.hasPureTensorSemantics() || op->getNumResults() != 1 ||
      op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      op.getNumLoops() != static_cast<unsigned>(rank + 1) ||
      op.getNumReductionLoops() != 1 || !isF32(op->getResult(0)))
    return false;
  // The loop roles, read off the output map and the one reduction loop.
  AffineMap outMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  if (!outMap.isProjectedPermutation() ||
      outMap.getNumResults() != static_cast<unsigned>(rank))
    return false;
  SmallVector<utils::IteratorType> it = op.getIteratorTypesArray();
  unsigned red = 0;
  for (unsigned d = 0; d < it.size(); ++d)
    if (it[d] == utils::IteratorType::reduction)
      red = d;
  MLIRContext *ctx = op.getContext();
  SmallVector<AffineExpr> o(outMap.getResults());
  AffineExpr r = getAffineDimExpr(red, ctx);
  AffineExpr n = o[rank - 1], m = o[rank - 2];
  SmallVector<AffineExpr> lhs, rhs;
  if (rank == 3)
    lhs.push_back(o[0]), rhs.push_back(o[0]);
  lhs.append({m, r});
  if (transposedRhs)
    rhs.append({n, r});
  else
    rhs.append({r, n});
  unsigned loops = op.getNumLoops();
  if (op.getMatchingIndexingMap(op.getDpsInputOperand(0)) !=
          AffineMap::get(loops, 0, lhs, ctx) ||
      op.getMatchingIndexingMap(op.getDpsInputOperand(1)) !=
          AffineMap::get(loops, 0, rhs, ctx))
    return false;

  // Payload: acc + ext(a) * ext(b), in f32.
  Block *body = op.getBlock();
  auto add = yielded(op).getDefiningOp<arith::AddFOp>();
  if (!add)
    return false;
  Value acc = body->getArgument(2);
  Value prod = add.getLhs() == acc ? add.getRhs() : add.getLhs();
  if ((add.getLhs() == acc) == (add.getRhs() == acc))
    return false;
  auto mul = prod.getDefiningOp<arith::MulFOp>();
  if (!mul || !mul.getType().isF32())
    return false;
  BlockArgument a = argThroughExt(mul.getLhs()),
                b = argThroughExt(mul.getRhs());
  if (!a || !b || a.getOwner() != body || b.getOwner() != body)
    return false;
  if (!((a.getArgNumber() == 0 && b.getArgNumber() == 1) ||
        (a.getArgNumber() == 1 && b.getArgNumber() == 0)))
    return false;
  for (Value in : op.getDpsInputs()) {
    Type t = getElementTypeOrSelf(in.getType());
    if (!t.isF32() && !t.isF16() && !t.isBF16())
      return false;
  }
  std::optional<APFloat> init = fillValue(op.getDpsInits()[0]);
  return init && init->isZero();
}

/// A linear form ci * i + cj * j + c of the query row i and key column j.
struct Linear {
  int64_t ci = 0, cj = 0, c = 0;
};

/// Reads an index computation in a payload whose loop `rowDim` is the query
/// row and `colDim` the key column.
std::optional<Linear> linearIndex(Value v, int64_t rowDim, int64_t colDim) {
  if (auto idx = v.getDefiningOp<linalg::IndexOp>()) {
    if (static_cast<int64_t>(idx.getDim()) == rowDim)
      return Linear{1, 0, 0};
    if (static_cast<int64_t>(idx.getDim()) == colDim)
      return Linear{0, 1, 0};
    return std::nullopt;
  }
  IntegerAttr cst;
  if (matchPattern(v, m_Constant(&cst)))
    return Linear{0, 0, cst.getValue().getSExtValue()};
  // Casts of index values keep them: sizes are static and small.
  if (auto cast = v.getDefiningOp<arith::IndexCastOp>())
    return linearIndex(cast.getIn(), rowDim, colDim);
  if (auto cast = v.getDefiningOp<arith::IndexCastUIOp>())
    return linearIndex(cast.getIn(), rowDim, colDim);
  auto combine = [&](Value a, Value b, int64_t sign) -> std::optional<Linear> {
    auto x = linearIndex(a, rowDim, colDim), y = linearIndex(b, rowDim, colDim);
    if (!x || !y)
      return std::nullopt;
    return Linear{x->ci + sign * y->ci, x->cj + sign * y->cj,
                  x->c + sign * y->c};
  };
  if (auto add = v.getDefiningOp<arith::AddIOp>())
    return combine(add.getLhs(), add.getRhs(), 1);
  if (auto sub = v.getDefiningOp<arith::SubIOp>())
    return combine(sub.getLhs(), sub.getRhs(), -1);
  return std::nullopt;
}

/// The smallest value of `l` over 0 <= i < rows, 0 <= j < cols.
int64_t minOver(Linear l, int64_t rows, int64_t cols) {
  return l.c + std::min<int64_t>(0, l.ci * (rows - 1)) +
         std::min<int64_t>(0, l.cj * (cols - 1));
}

/// For a condition over (i, j), the offset `off` such that the condition
/// holds exactly when j > i + off (true) or exactly when j <= i + off
/// (false, through `negated`).
std::optional<int64_t> causalOffset(Value cond, int64_t rowDim, int64_t colDim,
                                    int64_t rows, int64_t cols, bool &negated) {
  auto cmp = cond.getDefiningOp<arith::CmpIOp>();
  if (!cmp)
    return std::nullopt;
  auto a = linearIndex(cmp.getLhs(), rowDim, colDim);
  auto b = linearIndex(cmp.getRhs(), rowDim, colDim);
  if (!a || !b)
    return std::nullopt;
  using P = arith::CmpIPredicate;
  P pred = cmp.getPredicate();
  // Unsigned comparisons agree with signed ones on non-negative sides.
  if (pred == P::ugt || pred == P::uge || pred == P::ult || pred == P::ule) {
    if (minOver(*a, rows, cols) < 0 || minOver(*b, rows, cols) < 0)
      return std::nullopt;
    pred = pred == P::ugt   ? P::sgt
           : pred == P::uge ? P::sge
           : pred == P::ult ? P::slt
                            : P::sle;
  }
  // d = a - b = ci * i + cj * j + c, compared with 0; bring j to +1.
  Linear d{a->ci - b->ci, a->cj - b->cj, a->c - b->c};
  if (d.cj == -1) {
    d = Linear{-d.ci, 1, -d.c};
    // Swapping the sides of the comparison: d > 0 <=> -d < 0.
    switch (pred) {
    case P::sgt:
      pred = P::slt;
      break;
    case P::sge:
      pred = P::sle;
      break;
    case P::slt:
      pred = P::sgt;
      break;
    case P::sle:
      pred = P::sge;
      break;
    default:
      return std::nullopt;
    }
  }
  if (d.cj != 1 || d.ci != -1)
    return std::nullopt;
  // j - i + c PRED 0.
  switch (pred) {
  case P::sgt: // j > i - c
    negated = false;
    return -d.c;
  case P::sge: // j > i - c - 1
    negated = false;
    return -d.c - 1;
  case P::sle: // j <= i - c
    negated = true;
    return -d.c;
  case P::slt: // j <= i - c - 1
    negated = true;
    return -d.c - 1;
  default:
    return std::nullopt;
  }
}

/// A value that hides a key: -inf, or a finite value so negative that its
/// exp underflows to 0 next to any visible score (the type's lowest, or
/// at most -1e30).
bool isMaskFill(const APFloat &f) {
  if (f.isInfinity())
    return f.isNegative();
  if (f.isNaN() || !f.isNegative())
    return false;
  APFloat lowest = APFloat::getLargest(f.getSemantics(), /*Negative=*/true);
  return f.compare(lowest) == APFloat::cmpEqual || f.convertToDouble() <= -1e30;
}

/// `select(cond, fill, x)` / `select(cond, x, fill)` in a payload: whether
/// it hides exactly the keys j > i + (cols - rows). `x` is what survives.
bool isCausalSelect(arith::SelectOp sel, Value x, int64_t rowDim,
                    int64_t colDim, int64_t rows, int64_t cols) {
  Value fill;
  bool hideWhenTrue;
  if (sel.getFalseValue() == x)
    fill = sel.getTrueValue(), hideWhenTrue = true;
  else if (sel.getTrueValue() == x)
    fill = sel.getFalseValue(), hideWhenTrue = false;
  else
    return false;
  std::optional<APFloat> f = floatConstant(fill);
  if (!f || !isMaskFill(*f))
    return false;
  bool negated = false;
  std::optional<int64_t> off =
      causalOffset(sel.getCondition(), rowDim, colDim, rows, cols, negated);
  // Hidden set: {cond} when hideWhenTrue, else its complement; it must be
  // {j > i + off}.
  return off && negated != hideWhenTrue && *off == cols - rows;
}

class Matcher {
public:
  explicit Matcher(Sdpa &m) : m(m) {}

  /// Matches a P.V contraction (or the truncation of one) as the root.
  bool matchRoot(Operation *op) {
    auto lin = dyn_cast<linalg::LinalgOp>(op);
    if (!lin)
      return false;
    // The truncation of the f32 result to the input type, when present.
    linalg::LinalgOp pv = lin;
    linalg::LinalgOp trunc;
    if (isElementwise(lin, 3) || isElementwise(lin, 2)) {
      if (lin.getNumDpsInputs() != 1)
        return false;
      auto t = yielded(lin).getDefiningOp<arith::TruncFOp>();
      if (!t || t.getIn() != lin.getBlock()->getArgument(0))
        return false;
      trunc = lin;
      pv = lin.getDpsInputs()[0].getDefiningOp<linalg::LinalgOp>();
      if (!pv || !hasUses(pv->getResult(0), 1))
        return false;
    }
    m.rank = cast<ShapedType>(pv->getResult(0).getType()).getRank();
    if ((m.rank != 2 && m.rank != 3) ||
        !isContraction(pv, m.rank, /*transposedRhs=*/false))
      return false;
    m.ops.push_back(op);
    if (trunc)
      m.ops.push_back(pv);
    m.root = op;
    m.v = pv.getDpsInputs()[1];
    Value p = pv.getDpsInputs()[0];
    if (!hasUses(p, 1))
      return false;
    // P rounded to V's type before the product (as GPU flash kernels do).
    if (auto r = p.getDefiningOp<linalg::LinalgOp>();
        r && isElementwise(r, m.rank) && r.getNumDpsInputs() == 1) {
      auto t = yielded(r).getDefiningOp<arith::TruncFOp>();
      if (t && t.getIn() == r.getBlock()->getArgument(0)) {
        m.ops.push_back(r);
        p = r.getDpsInputs()[0];
        if (!hasUses(p, 1) || !isF32(p))
          return false;
      }
    }
    if (!isF32(p))
      return false;
    Value x = matchSoftmax(p);
    if (!x || !matchScores(x, /*sawScale=*/false))
      return false;
    return checkTypes(trunc ? trunc->getResult(0) : pv->getResult(0));
  }

private:
  Sdpa &m;

  /// softmax over the last dim of `x` producing `p`; returns x.
  Value matchSoftmax(Value p) {
    if (auto sm = p.getDefiningOp<linalg::SoftmaxOp>()) {
      if (sm.getDimension() != static_cast<uint64_t>(m.rank - 1) ||
          !isF32(sm.getInput()))
        return {};
      m.ops.push_back(sm);
      return hasUses(sm.getInput(), 1) ? sm.getInput() : Value();
    }
    // Decomposed: p = e / sum(e), e = exp(x - max(x)) (one or two ops).
    auto div = p.getDefiningOp<linalg::LinalgOp>();
    if (!isElementwise(div, m.rank) || div.getNumDpsInputs() != 2)
      return {};
    auto d = yielded(div).getDefiningOp<arith::DivFOp>();
    Block *body = div.getBlock();
    if (!d || d.getLhs() != body->getArgument(0) ||
        d.getRhs() != body->getArgument(1) ||
        !div.getMatchingIndexingMap(div.getDpsInputOperand(0)).isIdentity())
      return {};
    Value e = div.getDpsInputs()[0], sum = div.getDpsInputs()[1];
    auto sumOp = sum.getDefiningOp<linalg::LinalgOp>();
    Operation *add = lastDimReduction(sumOp, m.rank, e);
    if (!add || !isa<arith::AddFOp>(add) || !hasUses(sum, 1) ||
        !hasUses(e, 2) || !isF32(e))
      return {};
    // The denominator broadcasts along the reduced dim.
    if (div.getMatchingIndexingMap(div.getDpsInputOperand(1)) !=
        sumOp.getMatchingIndexingMap(sumOp.getDpsInitOperand(0)))
      return {};
    std::optional<APFloat> zero = fillValue(sumOp.getDpsInits()[0]);
    if (!zero || !zero->isZero())
      return {};
    m.ops.append({div, sumOp});

    // e = exp(x - max), fused or as sub then exp.
    auto expOp = e.getDefiningOp<linalg::LinalgOp>();
    if (!isElementwise(expOp, m.rank))
      return {};
    m.ops.push_back(expOp);
    auto exp = yielded(expOp).getDefiningOp<math::ExpOp>();
    if (!exp)
      return {};
    linalg::LinalgOp subOp = expOp;
    if (expOp.getNumDpsInputs() == 1) {
      if (exp.getOperand() != expOp.getBlock()->getArgument(0))
        return {};
      Value diff = expOp.getDpsInputs()[0];
      subOp = diff.getDefiningOp<linalg::LinalgOp>();
      if (!hasUses(diff, 1) || !isElementwise(subOp, m.rank) ||
          subOp.getNumDpsInputs() != 2)
        return {};
      m.ops.push_back(subOp);
      auto sub = yielded(subOp).getDefiningOp<arith::SubFOp>();
      if (!sub || !isSubOfArgs(sub, subOp))
        return {};
    } else {
      auto sub = exp.getOperand().getDefiningOp<arith::SubFOp>();
      if (expOp.getNumDpsInputs() != 2 || !sub || !isSubOfArgs(sub, expOp))
        return {};
    }
    Value x = subOp.getDpsInputs()[0], max = subOp.getDpsInputs()[1];
    auto maxOp = max.getDefiningOp<linalg::LinalgOp>();
    Operation *mx = lastDimReduction(maxOp, m.rank, x);
    if (!mx || !hasUses(max, 1) || !hasUses(x, 2) || !isF32(x) ||
        !subOp.getMatchingIndexingMap(subOp.getDpsInputOperand(0))
             .isIdentity() ||
        subOp.getMatchingIndexingMap(subOp.getDpsInputOperand(1)) !=
            maxOp.getMatchingIndexingMap(maxOp.getDpsInitOperand(0)))
      return {};
    // The max's start value must not change the max of a row that has a
    // visible score: -inf (or the lowest value), or NaN under maxnumf.
    std::optional<APFloat> init = fillValue(maxOp.getDpsInits()[0]);
    if (!init || !(isa<arith::MaxNumFOp>(mx) || isa<arith::MaximumFOp>(mx)))
      return {};
    bool neutral =
        (init->isInfinity() && init->isNegative()) ||
        init->compare(APFloat::getLargest(init->getSemantics(), true)) ==
            APFloat::cmpEqual ||
        (init->isNaN() && isa<arith::MaxNumFOp>(mx));
    if (!neutral)
      return {};
    m.ops.push_back(maxOp);
    return x;
  }

  static bool isSubOfArgs(arith::SubFOp sub, linalg::LinalgOp op) {
    Block *body = op.getBlock();
    return sub.getLhs() == body->getArgument(0) &&
           sub.getRhs() == body->getArgument(1);
  }

  /// The scores before softmax: Q.K^T, optionally scaled (first), then
  /// with an additive bias and/or a causal mask, in either order.
  bool matchScores(Value x, bool sawScale) {
    auto op = x.getDefiningOp<linalg::LinalgOp>();
    if (!op)
      return false;
    if (isContraction(op, m.rank, /*transposedRhs=*/true)) {
      m.ops.push_back(op);
      m.q = op.getDpsInputs()[0];
      m.k = op.getDpsInputs()[1];
      return true;
    }
    // Q.(K^T) with an explicit transpose of K.
    if (isContraction(op, m.rank, /*transposedRhs=*/false)) {
      auto tr = op.getDpsInputs()[1].getDefiningOp<linalg::TransposeOp>();
      SmallVector<int64_t> perm = m.rank == 3 ? SmallVector<int64_t>{0, 2, 1}
                                              : SmallVector<int64_t>{1, 0};
      if (!tr || !hasUses(tr->getResult(0), 1) ||
          tr.getPermutation() != ArrayRef<int64_t>(perm))
        return false;
      m.ops.append({op, tr});
      m.q = op.getDpsInputs()[0];
      m.k = tr.getInput();
      return true;
    }
    if (sawScale || !isElementwise(op, m.rank) || !isF32(x))
      return false;
    auto shape = cast<ShapedType>(x.getType()).getShape();
    int64_t rows = shape[m.rank - 2], cols = shape[m.rank - 1];
    Block *body = op.getBlock();
    Value result = yielded(op);
    Operation *def = result.getDefiningOp();
    if (!def)
      return false;
    m.ops.push_back(op);

    // Which input carries the scores: try each that is read elementwise.
    for (OpOperand *in : op.getDpsInputOperands()) {
      if (!op.getMatchingIndexingMap(in).isIdentity() || !hasUses(in->get(), 1))
        continue;
      Value arg = body->getArgument(in->getOperandNumber());
      Sdpa saved = m;
      if (matchStep(op, in, arg, def, rows, cols) &&
          matchScores(in->get(), m.scaleSeen))
        return true;
      m = saved;
    }
    return false;
  }

  /// One elementwise step on the scores `arg` (operand `in` of `op`).
  bool matchStep(linalg::LinalgOp op, OpOperand *in, Value arg, Operation *def,
                 int64_t rows, int64_t cols) {
    m.scaleSeen = false;
    Block *body = op.getBlock();
    int64_t rowDim = m.rank - 2, colDim = m.rank - 1;
    auto other = [&](Value a, Value b) { return a == arg ? b : a; };
    // The other operand: a constant, or a constant splat input.
    auto constantOf = [&](Value v) -> std::optional<APFloat> {
      if (auto ba = dyn_cast<BlockArgument>(v);
          ba && ba.getOwner() == body &&
          ba.getArgNumber() < op.getNumDpsInputs())
        return floatConstant(op.getDpsInputs()[ba.getArgNumber()]);
      if (v.getParentBlock() == body && !v.getDefiningOp<arith::ConstantOp>())
        return std::nullopt;
      return floatConstant(v);
    };
    unsigned inputs = op.getNumDpsInputs();

    // Scale: x * c or x / c (the first step after Q.K^T only).
    if (isa<arith::MulFOp, arith::DivFOp>(def) && inputs <= 2 &&
        (def->getOperand(0) == arg ||
         (isa<arith::MulFOp>(def) && def->getOperand(1) == arg))) {
      Value c = other(def->getOperand(0), def->getOperand(1));
      std::optional<APFloat> f = constantOf(c);
      if (!f || c == arg)
        return false;
      if (inputs == 2 && !isa<BlockArgument>(c))
        return false;
      double v = f->convertToDouble();
      if (isa<arith::DivFOp>(def)) {
        if (v == 0.0 || !std::isfinite(v))
          return false;
        v = 1.0 / v;
      }
      if (!std::isfinite(v))
        return false;
      m.scale = v;
      m.scaleSeen = true;
      return true;
    }

    // Causal mask in place: select(cond(i, j), fill, x).
    if (auto sel = dyn_cast<arith::SelectOp>(def)) {
      if (inputs != 1 || m.causal ||
          !isCausalSelect(sel, arg, rowDim, colDim, rows, cols))
        return false;
      m.causal = true;
      return true;
    }

    // Additive: x + bias, or x + an index-built causal mask.
    auto add = dyn_cast<arith::AddFOp>(def);
    if (!add || inputs != 2 || (add.getLhs() != arg && add.getRhs() != arg))
      return false;
    Value addend = other(add.getLhs(), add.getRhs());
    // x + select(cond, fill, 0) computed in the payload.
    if (auto sel = addend.getDefiningOp<arith::SelectOp>()) {
      if (m.causal || sel->getBlock() != body)
        return false;
      for (Value kept : {sel.getTrueValue(), sel.getFalseValue()}) {
        std::optional<APFloat> z = floatConstant(kept);
        if (z && z->isZero() &&
            isCausalSelect(sel, kept, rowDim, colDim, rows, cols)) {
          m.causal = true;
          return true;
        }
      }
      return false;
    }
    BlockArgument ba = argThroughExt(addend);
    if (!ba || ba.getOwner() != body || ba == arg)
      return false;
    OpOperand *bOperand = op.getDpsInputOperand(ba.getArgNumber());
    Value b = bOperand->get();
    Broadcast bc = broadcastOf(op.getMatchingIndexingMap(bOperand), m.rank);
    if (bc == Broadcast::other)
      return false;
    if (matchIndexMask(b, rows, cols)) {
      if (m.causal)
        return false;
      m.causal = true;
      return true;
    }
    Type bt = getElementTypeOrSelf(b.getType());
    if (m.bias || !(bt.isF32() || bt.isF16() || bt.isBF16()) ||
        !cast<ShapedType>(b.getType()).hasStaticShape())
      return false;
    m.bias = b;
    return true;
  }

  /// A tensor built by a linalg op from indices alone: 0 where key j of row
  /// i is visible, a hiding fill where j > i + (cols - rows).
  bool matchIndexMask(Value b, int64_t rows, int64_t cols) {
    auto gen = b.getDefiningOp<linalg::GenericOp>();
    if (!gen || gen.getNumDpsInputs() != 0 || gen.getNumDpsInits() != 1 ||
        gen->getNumResults() != 1 || !hasUses(b, 1))
      return false;
    int64_t r = gen.getNumLoops();
    if (r < 2 || gen.getNumParallelLoops() != gen.getNumLoops() ||
        !gen.getMatchingIndexingMap(gen.getDpsInitOperand(0)).isIdentity() ||
        gen.payloadUsesValueFromOperand(gen.getDpsInitOperand(0)))
      return false;
    auto shape = cast<ShapedType>(b.getType()).getShape();
    if (shape[r - 2] != rows || shape[r - 1] != cols)
      return false;
    auto sel = yielded(gen).getDefiningOp<arith::SelectOp>();
    if (!sel)
      return false;
    // The kept value is a constant 0.
    for (Value kept : {sel.getTrueValue(), sel.getFalseValue()}) {
      std::optional<APFloat> z = floatConstant(kept);
      if (z && z->isZero() &&
          isCausalSelect(sel, kept, r - 2, r - 1, rows, cols)) {
        m.ops.push_back(gen);
        return true;
      }
    }
    return false;
  }

  /// Element types and shapes attn.flash takes: q, k, v of one type T (f32,
  /// f16, bf16) with static shapes, D equal for all three, and a result of
  /// type T.
  bool checkTypes(Value result) {
    auto qt = cast<RankedTensorType>(m.q.getType());
    auto kt = cast<RankedTensorType>(m.k.getType());
    auto vt = cast<RankedTensorType>(m.v.getType());
    auto rt = cast<RankedTensorType>(result.getType());
    Type t = qt.getElementType();
    if (!(t.isF32() || t.isF16() || t.isBF16()) || kt.getElementType() != t ||
        vt.getElementType() != t || rt.getElementType() != t)
      return false;
    if (!qt.hasStaticShape() || !kt.hasStaticShape() || !vt.hasStaticShape())
      return false;
    int64_t r = m.rank;
    auto q = qt.getShape(), k = kt.getShape(), v = vt.getShape();
    if (q[r - 1] != k[r - 1] || v[r - 1] != q[r - 1] || k[r - 2] != v[r - 2])
      return false;
    // With Lq > Lk, bottom-right causal hides every key of the first rows:
    // flash writes 0 there, softmax NaN (or a uniform average).
    if (m.causal && q[r - 2] > k[r - 2])
      return false;
    if (m.bias) {
      auto bt = cast<RankedTensorType>(m.bias.getType());
      if (bt.getShape().take_back(2) != ArrayRef<int64_t>{q[r - 2], k[r - 2]})
        return false;
    }
    return true;
  }
};

} // namespace

namespace {

/// [B, S, D] (or [S, D]) -> [B * S, 1, D]: one head, B packed sequences.
Value toTokensHeadsDim(OpBuilder &b, Location loc, Value t, int64_t rank) {
  auto type = cast<RankedTensorType>(t.getType());
  ArrayRef<int64_t> s = type.getShape();
  Value rows = t;
  if (rank == 3)
    rows = tensor::CollapseShapeOp::create(
        b, loc, t, SmallVector<ReassociationIndices>{{0, 1}, {2}});
  int64_t tokens = rank == 3 ? s[0] * s[1] : s[0];
  auto packed =
      RankedTensorType::get({tokens, 1, s.back()}, type.getElementType());
  return tensor::ExpandShapeOp::create(
      b, loc, packed, rows, SmallVector<ReassociationIndices>{{0}, {1, 2}});
}

Value toBuffer(OpBuilder &b, Location loc, Value t) {
  auto type = cast<RankedTensorType>(t.getType());
  auto memref = MemRefType::get(type.getShape(), type.getElementType());
  return bufferization::ToBufferOp::create(b, loc, memref, t,
                                           /*read_only=*/true);
}

void rewrite(Sdpa &m) {
  Operation *root = m.root;
  OpBuilder b(root);
  Location loc = root->getLoc();
  auto qt = cast<RankedTensorType>(m.q.getType());
  auto kt = cast<RankedTensorType>(m.k.getType());
  auto rt = cast<RankedTensorType>(root->getResult(0).getType());
  int64_t r = m.rank;
  int64_t batch = r == 3 ? qt.getDimSize(0) : 1;
  int64_t lq = qt.getDimSize(r - 2), lk = kt.getDimSize(r - 2);

  Value q = toBuffer(b, loc, toTokensHeadsDim(b, loc, m.q, r));
  Value k = toBuffer(b, loc, toTokensHeadsDim(b, loc, m.k, r));
  Value v = toBuffer(b, loc, toTokensHeadsDim(b, loc, m.v, r));
  // Equal-length sequences: offsets 0, L, 2L, ...
  auto offsets = [&](int64_t len) {
    SmallVector<int32_t> cu;
    for (int64_t i = 0; i <= batch; ++i)
      cu.push_back(static_cast<int32_t>(i * len));
    auto type = RankedTensorType::get({batch + 1}, b.getI32Type());
    Value cst = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(type, ArrayRef<int32_t>(cu)));
    return toBuffer(b, loc, cst);
  };
  Value cuQ = offsets(lq), cuK = offsets(lk);
  Value scale = arith::ConstantOp::create(
      b, loc, b.getF32FloatAttr(static_cast<float>(m.scale)));
  Value bias;
  if (m.bias) {
    auto bt = cast<RankedTensorType>(m.bias.getType());
    bool perBatch = bt.getRank() == 3;
    auto expanded = RankedTensorType::get(
        {perBatch ? bt.getDimSize(0) : 1, 1, lq, lk}, bt.getElementType());
    SmallVector<ReassociationIndices> re =
        perBatch ? SmallVector<ReassociationIndices>{{0, 1}, {2}, {3}}
                 : SmallVector<ReassociationIndices>{{0, 1, 2}, {3}};
    bias = toBuffer(
        b, loc, tensor::ExpandShapeOp::create(b, loc, expanded, m.bias, re));
  }
  auto outType = MemRefType::get({batch * lq, 1, rt.getShape().back()},
                                 rt.getElementType());
  Value out = memref::AllocOp::create(b, loc, outType);
  FlashOp::create(b, loc, q, k, v, cuQ, cuK, scale, bias, Value(), Value(),
                  Value(), Value(), Value(), Value(), Value(), Value(), out,
                  /*lse=*/Value(), m.causal, TypeAttr(), ScheduleAttr());
  Value packed = bufferization::ToTensorOp::create(
      b, loc, memref::getTensorTypeFromMemRefType(outType), out,
      /*restrict=*/true, /*writable=*/true);
  Value rows = tensor::CollapseShapeOp::create(
      b, loc, packed, SmallVector<ReassociationIndices>{{0}, {1, 2}});
  Value result = rows;
  if (r == 3)
    result = tensor::ExpandShapeOp::create(
        b, loc, rt, rows, SmallVector<ReassociationIndices>{{0, 1}, {2}});
  root->getResult(0).replaceAllUsesWith(result);
  // The matched ops are dead now; erase them consumers first.
  for (Operation *op : m.ops)
    if (op->use_empty())
      op->erase();
}

struct RaiseSDPAPass : attn::impl::AttnRaiseSDPABase<RaiseSDPAPass> {
  void runOnOperation() override {
    SmallVector<Operation *> candidates;
    getOperation()->walk(
        [&](linalg::LinalgOp op) { candidates.push_back(op); });
    // Ops of an earlier match are erased: skip them.
    DenseSet<Operation *> erased;
    for (Operation *op : candidates) {
      if (erased.contains(op))
        continue;
      Sdpa m;
      if (!Matcher(m).matchRoot(op))
        continue;
      for (Operation *o : m.ops)
        erased.insert(o);
      rewrite(m);
    }
  }
};

} // namespace

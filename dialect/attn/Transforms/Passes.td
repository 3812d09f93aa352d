//===- Passes.td - attn transformation passes --------------*- tablegen -*-===//

#ifndef ATTN_TRANSFORMS_PASSES_TD
#define ATTN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def AttnPlan : Pass<"attn-plan"> {
  let summary = "Choose a tile schedule for every attn op";
  let description = [{
    Attaches `#attn.schedule<block_q, block_n, heads_per_program>` to every
    kernel op that has none, with defaults for the target: the number of
    query tokens per program, the KV tile size, and how many query heads of
    one KV head share a program (GQA packing: they share each KV tile load).
    Schedules already present are kept, so a user or an autotuner can pin
    them. For `rocdl`, `warps` counts waves, and `chip` (gfx90a, gfx942:
    wave64 MFMA; gfx1100: wave32 WMMA) is required; Q, K and V tiles are
    sized for the 64 KB of LDS.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "Target whose defaults to use: cpu, nvvm or rocdl">,
    Option<"chip", "chip", "std::string", /*default=*/"\"\"",
           "GPU chip (sm_90a: warpgroup-sized prefill tiles; gfx90a, "
           "gfx942 or gfx1100 for rocdl)">,
  ];
}

def AttnRaiseSDPA : Pass<"attn-raise-sdpa"> {
  let summary = "Raise linalg scaled dot-product attention to attn.flash";
  let description = [{
    Recognises attention written with upstream ops on tensors or buffers
    (`[B, S, D]`, `[S, D]` or `[B, H, S, D]`): `Q.K^T` as a
    `linalg.batch_matmul`/`linalg.matmul` (transposing indexing maps, an
    explicit `linalg.transpose` of K, or the equivalent `linalg.generic`),
    an optional constant scale (`* c` or `/ c`), an optional additive bias
    and an optional causal mask (a `linalg.generic` on `linalg.index`
    values), `linalg.softmax` over the key dim or its decomposed
    max/sub/exp/sum/div form, and the `P.V` contraction, with f32
    accumulation throughout. Each match whose semantics equal
    `attn.flash`'s is rewritten into `attn.flash` (3-D: one op on a single
    head and `B` equal-length sequences; 4-D: one op per batch entry on
    strided `[S, H, D]` views); on buffers, only when the intermediates are
    local allocations and nothing else touches memory between the matched
    ops. Everything else is left as it is.
    docs/raising.md lists the exact conditions.
  }];
  let dependentDialects = [
    "mlir::attn::AttnDialect", "mlir::arith::ArithDialect",
    "mlir::bufferization::BufferizationDialect",
    "mlir::memref::MemRefDialect", "mlir::scf::SCFDialect",
    "mlir::tensor::TensorDialect",
  ];
}

#endif // ATTN_TRANSFORMS_PASSES_TD

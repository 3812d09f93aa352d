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

#endif // ATTN_TRANSFORMS_PASSES_TD

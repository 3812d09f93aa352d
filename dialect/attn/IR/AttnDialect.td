//===- AttnDialect.td - attn dialect definition ------------*- tablegen -*-===//
//
// The attn dialect: attention kernels of LLM serving as single ops.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_IR_ATTNDIALECT_TD
#define ATTN_IR_ATTNDIALECT_TD

include "mlir/IR/OpBase.td"

def Attn_Dialect : Dialect {
  let name = "attn";
  let cppNamespace = "::mlir::attn";
  let summary = "Attention kernels of LLM serving (vLLM) as first-class ops";
  let description = [{
    The `attn` dialect describes the four attention kernels that vLLM serves
    with, one op each, plus the op that merges split-KV partial results:

    * `attn.prefix_prefill`: new query tokens attend to a paged KV-cache
      context, then causally to themselves.
    * `attn.unified`: mixed prefill + decode batches over a paged NHD cache,
      optionally split along the KV axis into segments.
    * `attn.flash`: varlen FlashAttention-2 forward with bottom-right causal
      masking, additive bias, dropout and fp8.
    * `attn.blocksparse`: per-head CSR block-sparse attention.
    * `attn.merge_states`: combines split-KV partial outputs.

    The ops operate on memrefs in destination-passing style: they read their
    inputs and write the `out` operand (and the partial-statistics operands
    of the split forms). Scalars that vLLM passes at run time (the softmax
    scale, softcap, dropout probability and Philox seed/offset) are SSA
    operands; what vLLM's kernels specialize on (head dim, page size, window,
    causal, element types, feature flags) is static in the types or in
    attributes. `docs/semantics.md` gives the exact math.
  }];
  let useDefaultAttributePrinterParser = 1;
}

class Attn_Op<string mnemonic, list<Trait> traits = []>
    : Op<Attn_Dialect, mnemonic, traits>;

#endif // ATTN_IR_ATTNDIALECT_TD

"""attn_mlir.integrations.transformers against transformers' own attention.

Small randomly initialised models (no downloads) run once with
attn_implementation="attn_mlir" and once with transformers' reference
("sdpa", or "eager" where sdpa lacks the feature) on the same weights:
logits of a padded batch must agree, and greedy generation must pick the
same tokens. Llama-style covers GQA and the flash path; Gemma-2-style the
sliding window, softcap and a non-default scaling (unified path); gpt-oss
the attention sinks. fp32 on the CPU; with ATTN_MLIR_TEST_DEVICE=cuda (and
a GPU) bf16 on the GPU.
"""

import copy
import inspect
import os
import types

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

try:
    import torch
    import transformers
except ImportError as e:   # optional test dependencies
    pytest.skip(f"needs torch and transformers: {e}", allow_module_level=True)

if transformers.__version__.split(".")[0] != "5":
    pytest.skip(f"attn_mlir.integrations.transformers supports transformers "
                f"5.x, found {transformers.__version__}",
                allow_module_level=True)

from transformers import (DynamicCache, Gemma2Config,  # noqa: E402
                          Gemma2ForCausalLM, GptOssConfig, GptOssForCausalLM,
                          LlamaConfig, LlamaForCausalLM)
from transformers.integrations.sdpa_attention import (  # noqa: E402
    sdpa_attention_forward)
from transformers.masking_utils import (  # noqa: E402
    causal_mask_function, eager_mask, sdpa_mask,
    sliding_window_causal_mask_function)
from transformers.models.gemma2.modeling_gemma2 import (  # noqa: E402
    eager_attention_forward as gemma2_eager)

from attn_mlir.integrations import transformers as hf  # noqa: E402
from reference import RECORDING_ONLY  # noqa: E402

ON_GPU = (os.environ.get("ATTN_MLIR_TEST_DEVICE") == "cuda"
          and torch.cuda.is_available())
# A recording run for a GPU on a machine without one (ATTN_MLIR_TEST_DEVICE=
# cuda, ATTN_MLIR_DRY_RUN=1, ATTN_MLIR_TEST_RECORD_ALL=1): the GPU run's
# dtype on the CPU, so that it records the kernels a GPU run calls; no
# kernel ran, so nothing is compared.
RECORDING_FOR_GPU = (RECORDING_ONLY and not ON_GPU and
                     os.environ.get("ATTN_MLIR_TEST_DEVICE") == "cuda")
DEVICE = torch.device("cuda" if ON_GPU else "cpu")
DTYPE = torch.bfloat16 if ON_GPU or RECORDING_FOR_GPU else torch.float32
# fp32 on the CPU: both sides compute in f32 (observed differences ~1e-5).
# bf16: each side rounds its activations to bf16 (8 bits) in every layer.
TOL = dict(atol=0.1, rtol=0.05) if ON_GPU else dict(atol=1e-4, rtol=1e-4)
# Greedy tokens may differ in bf16 only where the reference's top two logits
# are this close (then the rest of the sequence legitimately diverges).
TIE = 0.1 if ON_GPU else 0.0

# One head geometry for every model, so the kernels compile few times:
# 4 query heads, 2 KV heads (GQA), head dim 32.
COMMON = dict(vocab_size=128, hidden_size=64, intermediate_size=128,
              num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=32,
              max_position_embeddings=128, initializer_range=0.2,
              pad_token_id=0, bos_token_id=1, eos_token_id=None)
PROMPT, LENS, NEW_TOKENS = 12, (12, 7, 10), 32
# The models' cache argument (past_key_values before its rename).
CACHE_KW = "cache" if "cache" in inspect.signature(
    LlamaForCausalLM.forward).parameters else "past_key_values"
WINDOW = 6   # shorter than the prompts: the window bites in prefill and decode


def _config(name):
    if name == "llama":
        return LlamaConfig(**COMMON), LlamaForCausalLM, "sdpa"
    if name == "gemma2":
        # softcap 1 and scaling 16^-0.5 (not head_dim^-0.5) change the scores
        # visibly; sdpa has no softcap, so eager is the reference. Untied
        # embeddings: tied ones (scaled by sqrt(hidden)) make a random model
        # repeat its last token.
        return (Gemma2Config(**COMMON, sliding_window=WINDOW,
                             attn_logit_softcapping=1.0,
                             query_pre_attn_scalar=16,
                             tie_word_embeddings=False),
                Gemma2ForCausalLM, "eager")
    if name == "gpt_oss":
        cfg = dict(COMMON, intermediate_size=64)
        # One expert: top-1 routing among several is discontinuous, so bf16
        # rounding anywhere upstream (the attention kernels included) can
        # switch experts and move the logits by whole units; seen on an H100:
        # a greedy token 4.2 logits apart at step 26 with two experts.
        return (GptOssConfig(**cfg, sliding_window=WINDOW,
                             num_local_experts=1, num_experts_per_tok=1,
                             rope_parameters={"rope_type": "default",
                                              "rope_theta": 10000.0}),
                GptOssForCausalLM, "eager")
    raise ValueError(name)


_MODELS = {}


def models(name):
    """(attn_mlir model, reference model) with the same weights."""
    if name not in _MODELS:
        config, cls, ref_impl = _config(name)
        torch.manual_seed(0)
        ref = cls(copy.deepcopy(config)).eval()
        if name == "gpt_oss":
            # Sinks start at 0 (an extra exp(0) in the denominator): make
            # them differ per head so that a wrong sink shows.
            with torch.no_grad():
                for layer in ref.model.layers:
                    layer.self_attn.sinks.normal_(0.0, 1.0)
        ref = ref.to(device=DEVICE, dtype=DTYPE)
        model = copy.deepcopy(ref)
        ref.set_attn_implementation(ref_impl)
        model.set_attn_implementation(hf.NAME)
        assert model.config is not ref.config
        _MODELS[name] = model, ref
    return _MODELS[name]


def batch(side):
    """Token ids [3, PROMPT] of LENS tokens each, padded on `side`."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(2, COMMON["vocab_size"], (len(LENS), PROMPT),
                        generator=g)
    mask = torch.zeros(len(LENS), PROMPT, dtype=torch.long)
    for b, n in enumerate(LENS):
        if side == "left":
            mask[b, PROMPT - n:] = 1
        else:
            mask[b, :n] = 1
    ids[mask == 0] = COMMON["pad_token_id"]
    return ids.to(DEVICE), mask.to(DEVICE)


def close(got, want, where):
    if RECORDING_FOR_GPU:
        return
    torch.testing.assert_close(got.float(), want.float(), **TOL,
                               msg=lambda m: f"{where}: {m}")


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("name", ["llama", "gemma2", "gpt_oss"])
def test_padded_logits(name, side):
    model, ref = models(name)
    ids, mask = batch(side)
    with torch.no_grad():
        got = model(ids, attention_mask=mask).logits
        want = ref(ids, attention_mask=mask).logits
    valid = mask.bool()   # padded positions' logits mean nothing
    close(got[valid], want[valid], f"{name} {side}-padded logits")


@pytest.mark.parametrize("name,cache", [("llama", None), ("gemma2", None),
                                        ("gemma2", "static"),
                                        ("gpt_oss", None)])
def test_greedy_generation(name, cache):
    """32 greedy tokens after a left-padded prompt: every decode step is one
    query over a longer cache (bottom-right causal); gemma2's sliding layers
    keep only the window; a static cache has empty slots after the queries."""
    model, ref = models(name)
    ids, mask = batch("left")
    kw = dict(max_new_tokens=NEW_TOKENS, do_sample=False,
              pad_token_id=COMMON["pad_token_id"])
    if cache:
        kw["cache_implementation"] = cache
    got = model.generate(ids, attention_mask=mask, **kw)[:, PROMPT:]
    out = ref.generate(ids, attention_mask=mask, output_logits=True,
                       return_dict_in_generate=True, **kw)
    want = out.sequences[:, PROMPT:]
    if RECORDING_FOR_GPU:
        return
    assert got.shape == want.shape == (len(LENS), NEW_TOKENS)
    # A model that repeats one token would make the comparison weak.
    assert len(set(want.flatten().tolist())) > 8
    for b in range(len(LENS)):
        diff = (got[b] != want[b]).nonzero()
        if not len(diff):
            continue
        t = int(diff[0])
        logits = out.logits[t][b].float()
        margin = float(logits[want[b, t]] - logits[got[b, t]])
        assert margin <= TIE, (
            f"{name}: sequence {b} differs first at token {t} "
            f"({int(got[b, t])} vs {int(want[b, t])}) although the reference "
            f"prefers its token by {margin:.3g}:\n{got[b]}\n{want[b]}")


def test_static_cache_generation_under_torch_compile(monkeypatch):
    """transformers compiles the decode of a static cache (on CUDA; forced
    here on any device): the attention function runs inside dynamo's
    trace. The H100 (torch 2.11) failed here with "cu_seqlens_q: expected
    int32": a plan made inside the traced frame came back with int64
    offsets (reproduced on the CPU with torch 2.11 and transformers 5.17
    under inductor); plans are now made eagerly. Tokens as uncompiled."""
    from transformers.generation.configuration_utils import CompileConfig
    model, _ = models("gemma2")
    ids, mask = batch("left")
    kw = dict(max_new_tokens=6, do_sample=False,
              pad_token_id=COMMON["pad_token_id"],
              cache_implementation="static")
    want = model.generate(ids, attention_mask=mask, **kw)
    torch._dynamo.reset()
    monkeypatch.setattr(type(model), "_valid_auto_compile_criteria",
                        lambda self, *a, **k: True)
    monkeypatch.setattr(model.generation_config, "compile_config",
                        CompileConfig(mode="default"))
    got = model.generate(ids, attention_mask=mask, **kw)
    torch._dynamo.reset()
    assert RECORDING_FOR_GPU or torch.equal(got, want)


@pytest.mark.parametrize("name", ["llama", "gemma2"])
def test_several_new_tokens_over_cache(name):
    """A chunk of 3 new tokens after a cached, left-padded prefix (chunked
    prefill, speculative verification): Q = 3 < K."""
    model, ref = models(name)
    ids, mask = batch("left")
    cut = PROMPT - 3
    logits = []
    with torch.no_grad():
        for m in (model, ref):
            cache = {CACHE_KW: DynamicCache(config=m.config)}
            m(ids[:, :cut], attention_mask=mask[:, :cut], **cache)
            assert cache[CACHE_KW].get_seq_length() == cut
            logits.append(m(ids[:, cut:], attention_mask=mask,
                            **cache).logits)
    close(logits[0], logits[1], f"{name} 3 tokens over the cache")


def test_gemma2_features_matter():
    """The gemma2 comparisons can fail: without the window or the softcap
    the reference's logits move far beyond the tolerance."""
    _, ref = models("gemma2")
    ids, mask = batch("left")
    valid = mask.bool()
    with torch.no_grad():
        want = ref(ids, attention_mask=mask).logits[valid].float()
        for change in (dict(sliding_window=4096),
                       dict(attn_logit_softcapping=None)):
            other = copy.deepcopy(ref)
            for key, value in change.items():
                setattr(other.config, key, value)
                for layer in other.model.layers:
                    attn = layer.self_attn
                    if key == "sliding_window" and attn.sliding_window:
                        attn.sliding_window = value
                    if key == "attn_logit_softcapping":
                        attn.attn_logit_softcapping = value
            moved = other(ids, attention_mask=mask).logits[valid].float()
            assert (moved - want).abs().max() > 20 * TOL["atol"], change


# ---------------------------------------------------------------------------
# The attention function on its own
# ---------------------------------------------------------------------------

B, Q, H, HK, D = 3, 10, 4, 2, 32


def _qkv(seed=0, k_len=Q):
    g = torch.Generator().manual_seed(seed)
    mk = lambda *s: torch.randn(*s, generator=g).to(DEVICE, DTYPE)  # noqa
    return mk(B, H, Q, D), mk(B, HK, k_len, D), mk(B, HK, k_len, D)


def _module(causal=True):
    return types.SimpleNamespace(is_causal=causal, num_key_value_groups=H // HK,
                                 head_dim=D, training=False)


def _padding(side, k_len=Q):
    lens = torch.tensor([k_len, 4, 7])
    cols = torch.arange(k_len)[None, :]
    keep = cols >= k_len - lens[:, None] if side == "left" else \
        cols < lens[:, None]
    return keep.to(DEVICE)


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("form", ["bool", "additive"])
def test_4d_causal_padding_mask(side, form):
    """A 4-D mask (what sdpa and eager get) of causal attention over padded
    sequences is recognised: same outputs as sdpa on the real query rows."""
    q, k, v = _qkv()
    pad = _padding(side)
    make = sdpa_mask if form == "bool" else eager_mask
    mask = make(batch_size=B, q_length=Q, kv_length=Q,
                mask_function=causal_mask_function, attention_mask=pad,
                allow_is_causal_skip=False, dtype=DTYPE, device=DEVICE)
    got, _ = hf.attention_forward(_module(), q, k, v, mask)
    want, _ = sdpa_attention_forward(_module(), q, k, v, mask)
    close(got[pad], want[pad], f"{side} {form}")


def test_4d_sliding_window_mask_with_cache_offset():
    """Decode-like shapes (Q < K, queries last) with a window and softcap,
    against gemma2's eager attention under the same 4-D mask."""
    k_len = Q + 5
    q, k, v = _qkv(1, k_len)
    pad = _padding("left", k_len)
    mask = eager_mask(batch_size=B, q_length=Q, kv_length=k_len, q_offset=5,
                      mask_function=sliding_window_causal_mask_function(WINDOW),
                      attention_mask=pad, dtype=DTYPE, device=DEVICE)
    kw = dict(scaling=0.25, sliding_window=WINDOW, softcap=1.0)
    got, _ = hf.attention_forward(_module(), q, k, v, mask, **kw)
    want, _ = gemma2_eager(_module(), q, k, v, mask, **kw)
    rows = pad[:, 5:]
    close(got[rows], want.to(got.dtype)[rows], "sliding window 4-D")


def test_4d_mask_other_patterns_raise():
    q, k, v = _qkv()
    causal = torch.ones(Q, Q, dtype=torch.bool, device=DEVICE).tril()
    block = causal.clone()
    block[2:5, 2:5] = True          # a bidirectional block (image tokens)
    with pytest.raises(ValueError, match="not causal"):
        hf.attention_forward(_module(), q, k, v,
                             block.expand(B, 1, Q, Q))
    bias = torch.zeros(B, 1, Q, Q, device=DEVICE, dtype=DTYPE)
    bias.masked_fill_(~causal, torch.finfo(DTYPE).min)
    bias[:, :, 5, 1] = -1.0         # an additive bias, not a mask
    with pytest.raises(ValueError, match="bias"):
        hf.attention_forward(_module(), q, k, v, bias)


def test_packed_sequences_raise():
    """position_ids that pack two sequences in one row (transformers looks
    for them without a cache) give a mask the kernels cannot express: a clear
    error, not a silent causal run."""
    model, _ = models("llama")
    ids = torch.randint(2, 100, (1, 10), device=DEVICE)
    pos = torch.tensor([[0, 1, 2, 3, 0, 1, 2, 3, 4, 5]], device=DEVICE)
    with torch.no_grad(), pytest.raises(ValueError, match="packed sequences"):
        model(ids, position_ids=pos, use_cache=False)


def test_mask_kind_must_match_layer():
    """A sliding-window mask handed to a layer without a window (or the
    reverse) raises instead of computing the wrong pattern."""
    q, k, v = _qkv()
    pad = _padding("left")
    mask = hf.attention_mask(B, Q, Q, mask_function=(
        sliding_window_causal_mask_function(4)), attention_mask=pad,
        local_size=4, device=DEVICE)
    with pytest.raises(ValueError, match="sliding_window=None"):
        hf.attention_forward(_module(), q, k, v, mask)
    with pytest.raises(ValueError, match="causal=False"):
        hf.attention_forward(_module(causal=False), q, k, v, mask)


def test_inference_only():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="dropout"):
        hf.attention_forward(_module(), q, k, v, None, dropout=0.1)
    q.requires_grad_(True)
    out, _ = hf.attention_forward(_module(), q, k, v, None)
    with pytest.raises(RuntimeError, match="no backward"):
        out.float().sum().backward()

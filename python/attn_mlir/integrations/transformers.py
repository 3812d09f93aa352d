"""attn_mlir as a Hugging Face transformers attention implementation.

    import attn_mlir.integrations.transformers  # registers "attn_mlir"
    model = AutoModelForCausalLM.from_pretrained(
        name, attn_implementation="attn_mlir")

Importing this module registers `attention_forward` with transformers'
`AttentionInterface` and `attention_mask` with its `AttentionMaskInterface`
under the name "attn_mlir" (`register()` does it again, e.g. after a
transformers reload).

Transformers versions: >= 5.0, < 6 (the masking_utils mask interface with
`q_offset`/`kv_offset`); tested with 5.24.0. Importing it with another
version raises ImportError.

What runs where (docs/transformers.md has the details):

* Plain causal or bidirectional attention: `attn_mlir.ops.flash` over the
  unpadded (varlen) batch; GQA/MQA natively, `scaling` as given (default
  head_dim ** -0.5).
* `sliding_window`, `softcap` (Gemma-2) and attention sinks (`s_aux`,
  gpt-oss): `attn_mlir.ops.unified` over a paged copy of the keys (pages of
  16 rows, one block table row per sequence). A bidirectional sliding
  window raises NotImplementedError.
* Padding: the mask function hands the attention a 2-D boolean key mask
  (like transformers' flash-attention path); padded keys are dropped and
  padded query rows output zeros. Left and right padding, caches that grow
  (DynamicCache, sliding-window layers) and static caches work, and so do
  decode steps (one or several new tokens over a longer cache: the causal
  mask is aligned bottom-right, as transformers' is).
* Masks that are not causal / sliding-window causal / bidirectional over
  padded sequences (packed sequences from position_ids, chunked attention,
  image-token bidirectional blocks, custom and/or mask functions, 4-D masks
  with another pattern or with additive biases) raise ValueError: there is
  no silent fallback. Use attn_implementation="sdpa" or "eager" for them.
* Inference only: `dropout` must be 0 (model.eval()), and a backward pass
  through the attention raises RuntimeError. No attention weights are
  returned (`output_attentions` gives None).
"""

import weakref

import torch
import transformers
from transformers.masking_utils import (AttentionMaskInterface, sdpa_mask,
                                        prepare_padding_mask)
from transformers.modeling_utils import AttentionInterface

from .. import ops

NAME = "attn_mlir"
TESTED_VERSIONS = ">=5.0,<6 (tested: 5.24.0)"

# Keys per page of the dense paged view that `unified` reads.
PAGE_SIZE = 16


def _check_version():
    parts = transformers.__version__.split(".")
    try:
        major = int(parts[0])
    except ValueError:
        major = -1
    if major != 5:
        raise ImportError(
            f"attn_mlir.integrations.transformers supports transformers "
            f"{TESTED_VERSIONS}, found {transformers.__version__}")


_check_version()


# ---------------------------------------------------------------------------
# Mask interface
# ---------------------------------------------------------------------------

def attention_mask(batch_size, q_length, kv_length, q_offset=0, kv_offset=0,
                   mask_function=None, attention_mask=None, local_size=None,
                   use_vmap=False, device="cpu", **kwargs):
    """The mask transformers builds for attn_mlir layers: a boolean [batch,
    L] key mask (column j is key j of the layer's key tensor; for causal
    masks the queries are the last q_length of the L columns, keys past L are
    unused static-cache slots) or None when every key is valid.

    The pattern that `mask_function` describes is checked here, once per
    forward, against causal, sliding-window causal (`local_size`) and
    bidirectional attention on the actual query/key positions; anything else
    (packed sequences, chunked attention, or/and overlays) raises ValueError.
    The patterns that match are recorded on the mask so that each layer
    checks that its own `is_causal` and `sliding_window` agree."""
    q_offset = int(q_offset)   # a tensor with static caches
    kv_offset = int(kv_offset)
    kinds = _pattern_kinds(batch_size, q_length, kv_length, q_offset,
                           kv_offset, mask_function, local_size, use_vmap,
                           device)
    padding = prepare_padding_mask(attention_mask, kv_length, kv_offset)
    if padding is not None:
        padding = padding[:, kv_offset:kv_offset + kv_length]
    causal = any(kind == "causal" for kind, _ in kinds)
    # Causal masks stop at the last query: later keys (empty static-cache
    # slots) are never visible.
    width = q_offset + q_length - kv_offset if causal else kv_length
    if causal and not q_length <= width <= kv_length:
        raise ValueError(
            f"attention_mask: queries at positions [{q_offset}, "
            f"{q_offset + q_length}) do not end inside the keys [{kv_offset}, "
            f"{kv_offset + kv_length}); attn_mlir cannot align them")
    if padding is None:
        mask = torch.ones(batch_size, width, dtype=torch.bool, device=device)
    else:
        mask = padding[:, :width].to(device=device, dtype=torch.bool)
    if kinds == {("causal", None)} and width == kv_length and bool(mask.all()):
        return None   # plain causal, no padding: the fast path
    mask._attn_mlir_kinds = frozenset(kinds)
    return mask


def _pattern_kinds(batch_size, q_length, kv_length, q_offset, kv_offset,
                   mask_function, local_size, use_vmap, device):
    """The (kind, window) pairs that `mask_function` equals on this grid:
    ("causal", None), ("causal", local_size), ("bidirectional", None)."""
    if mask_function is None:
        return {("causal", None)}
    # The pattern without padding, built exactly as sdpa's mask is.
    grid = sdpa_mask(batch_size=batch_size, q_length=q_length,
                     kv_length=kv_length, q_offset=q_offset,
                     kv_offset=kv_offset, mask_function=mask_function,
                     attention_mask=None, allow_is_causal_skip=False,
                     use_vmap=use_vmap, device=device)
    if grid is None:   # only the skips disabled above return None
        raise RuntimeError("attn_mlir: transformers' sdpa_mask skipped a "
                           "mask it was asked to build")
    q = torch.arange(q_length, device=device)[:, None] + q_offset
    k = torch.arange(kv_length, device=device)[None, :] + kv_offset
    candidates = {("causal", None): k <= q,
                  ("bidirectional", None): torch.ones_like(k <= q)}
    if local_size is not None:
        candidates[("causal", int(local_size))] = (k <= q) & \
            (k > q - int(local_size))
    kinds = {kind for kind, want in candidates.items()
             if bool((grid == want).all())}
    if not kinds:
        raise ValueError(
            "attention_mask: attn_mlir supports causal, sliding-window causal "
            "and bidirectional attention over padded sequences; this model's "
            "mask has another pattern (packed sequences from position_ids, "
            "chunked attention, image-token blocks or a custom mask "
            "function). Use attn_implementation='sdpa' or 'eager' for it.")
    return kinds


# ---------------------------------------------------------------------------
# Attention
# ---------------------------------------------------------------------------

class _Plan:
    """Which rows of the padded [batch, len] query and key tensors take part,
    as varlen offsets. `qsel`/`ksel`: bool [batch, Q] / [batch, K], or None
    for all rows."""

    def __init__(self, batch, q_len, k_len, qsel, ksel, device):
        self.qsel, self.ksel = qsel, ksel
        i32 = dict(dtype=torch.int32, device=device)
        if qsel is None:
            lq = torch.full((batch,), q_len, **i32)
        else:
            lq = qsel.sum(1, dtype=torch.int32)
        if ksel is None:
            self.lk = torch.full((batch,), k_len, **i32)
            self.max_k = k_len
            self.contiguous = True
        else:
            self.lk = ksel.sum(1, dtype=torch.int32)
            self.max_k = int(self.lk.max()) if batch else 0
            # Valid keys form one run per sequence: at most one 0 -> 1 step.
            starts = ksel.clone()
            starts[:, 1:] &= ~ksel[:, :-1]
            self.contiguous = bool((starts.sum(1) <= 1).all())
        zero = torch.zeros(1, **i32)
        # int32 throughout: the kernels read int32 offsets (see _plan for
        # torch.compile).
        self.cu_q = torch.cat([zero, lq.cumsum(0, dtype=torch.int32)])
        self.cu_k = torch.cat([zero, self.lk.cumsum(0, dtype=torch.int32)])
        if qsel is not None and bool((lq > self.lk).any()):
            raise ValueError("attention_mask: a sequence has more query rows "
                             "than visible keys")


# A forward pass hands every layer the same mask object: its plan is made
# once (it reads the mask on the host) and looked up by identity after.
_PLANS = {}


# Made eagerly, also under torch.compile (transformers compiles the decode of
# static caches): a plan reads the mask on the host (data-dependent branches,
# graph breaks anyway), and dynamo 2.11 rebuilt a plan made inside a traced
# frame with an int64 tensor for its int32 cu_q (the call then failed with
# "cu_seqlens_q: expected int32"). Its tensors enter the graph as inputs.
@torch.compiler.disable
def _plan(mask, batch, q_len, k_len, causal, window, device):
    key = (id(mask), mask._version if mask is not None else None, batch,
           q_len, k_len, causal, window, str(device))
    hit = _PLANS.get(key)
    if hit is not None and hit[0]() is mask:
        return hit[1]
    if mask is None:
        plan = _Plan(batch, q_len, k_len, None, None, device)
    elif mask.dim() == 2:
        plan = _plan_2d(mask, batch, q_len, k_len, causal, device)
    elif mask.dim() == 4:
        plan = _plan_4d(mask, batch, q_len, k_len, causal, window, device)
    else:
        raise ValueError(f"attention_mask: expected a 2-D [batch, keys] or 4-D "
                         f"[batch, 1, queries, keys] mask, got shape "
                         f"{tuple(mask.shape)}")
    if mask is not None:
        if len(_PLANS) > 16:
            _PLANS.clear()
        _PLANS[key] = (weakref.ref(mask), plan)
    return plan


def _plan_2d(mask, batch, q_len, k_len, causal, device):
    """A key mask (1 = valid), transformers' flash-attention convention:
    column j is key j; the last k_len columns are kept when it is longer, and
    missing trailing columns are invalid keys (static-cache slots). Causal
    queries are the last q_len columns."""
    if mask.shape[0] != batch:
        raise ValueError(f"attention_mask: batch {mask.shape[0]}, expected "
                         f"{batch}")
    m = mask.to(device=device).bool()
    if m.shape[1] > k_len:
        m = m[:, -k_len:]
    width = m.shape[1]
    if causal:
        if width < q_len:
            raise ValueError(f"attention_mask: {width} key columns for "
                             f"{q_len} queries")
        qsel = m[:, width - q_len:]
    else:
        qsel = None
    if width < k_len:
        m = torch.cat([m, m.new_zeros(batch, k_len - width)], dim=1)
    if bool(m.all()):
        return _Plan(batch, q_len, k_len, None, None, device)
    return _Plan(batch, q_len, k_len, qsel, m, device)


def _plan_4d(mask, batch, q_len, k_len, causal, window, device):
    """A full [batch, 1 or heads, Q, K'] mask (boolean, True = visible, or
    additive: 0 visible, very negative hidden). It is reduced to a key mask
    and that is checked to give exactly the same visibility, under this
    layer's causal flag and window, on every query row whose own key is
    visible to some row; the other rows (padding queries) output zeros."""
    if mask.shape[0] not in (1, batch) or mask.shape[2] != q_len or \
            mask.shape[3] < k_len:
        raise ValueError(f"attention_mask: 4-D mask of shape "
                         f"{tuple(mask.shape)} does not fit queries "
                         f"[{batch}, {q_len}] and {k_len} keys")
    m = mask[..., :k_len].to(device)
    if m.dtype == torch.bool:
        seen = m
    else:
        hidden = m <= torch.finfo(m.dtype).min / 2
        if not bool(((m == 0) | hidden).all()):
            raise ValueError("attention_mask: the 4-D mask adds a bias "
                             "(values other than 0 and the dtype's minimum); "
                             "attn_mlir only takes visibility masks")
        seen = ~hidden
    if seen.shape[1] != 1:
        if not bool((seen == seen[:, :1]).all()):
            raise ValueError("attention_mask: the 4-D mask differs between "
                             "heads; attn_mlir takes one mask for all heads")
    seen = seen[:, 0].expand(batch, q_len, k_len)
    keys = seen.any(1)                      # [batch, K]
    width = k_len
    if causal:
        # A causal row's last visible key is its own position: query r sits
        # at column start + r (start = K - Q unless a static cache has empty
        # slots after the queries). Rows of right padding see less, rows of
        # left padding nothing, so the largest offset is the queries'.
        cols = torch.arange(k_len, device=device)
        last = torch.where(seen, cols, -1).amax(-1)          # [batch, Q]
        has = last >= 0
        if bool(has.any()):
            offset = last - torch.arange(q_len, device=device)
            width = min(max(int(offset[has].max()) + q_len, q_len), k_len)
    key_mask = keys[:, :width]
    plan = _plan_2d(key_mask, batch, q_len, k_len, causal, device)
    expect = _visibility(plan, batch, q_len, k_len, causal, window, device)
    rows = torch.ones(batch, q_len, dtype=torch.bool, device=device) \
        if plan.qsel is None else plan.qsel
    if not bool((expect == seen)[rows].all()):
        kind = "causal" if causal else "bidirectional"
        if window:
            kind += f" sliding-window ({window})"
        raise ValueError(
            f"attention_mask: this 4-D mask is not {kind} attention over "
            f"padded sequences, which is all attn_mlir computes; use "
            f"attn_implementation='sdpa' or 'eager' for custom masks")
    return plan


def _visibility(plan, batch, q_len, k_len, causal, window, device):
    """bool [batch, Q, K]: what the varlen kernels compute for `plan` (query
    i of a sequence sees packed key j when j <= i + Lk - Lq, bottom-right,
    and (i + Lk - Lq) - j < window)."""
    ksel = plan.ksel if plan.ksel is not None else \
        torch.ones(batch, k_len, dtype=torch.bool, device=device)
    qsel = plan.qsel if plan.qsel is not None else \
        torch.ones(batch, q_len, dtype=torch.bool, device=device)
    kj = ksel.long().cumsum(1) - 1          # packed key index
    qi = qsel.long().cumsum(1) - 1          # packed query index
    lk = ksel.sum(1)
    lq = qsel.sum(1)
    qpos = (qi + (lk - lq)[:, None])[:, :, None]
    see = ksel[:, None, :].expand(batch, q_len, k_len)
    if causal:
        see = see & (kj[:, None, :] <= qpos)
    if window is not None:
        see = see & (qpos - kj[:, None, :] < window)
    return see


class _NoBackward(torch.autograd.Function):
    """Runs the kernels in forward; a backward pass raises (the kernels have
    none), rather than silently cutting the graph at the attention."""

    @staticmethod
    def forward(ctx, query, key, value, run):
        return run(query, key, value)

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError(
            "attn_mlir: attention has no backward pass (inference only); "
            "train with attn_implementation='sdpa' or 'eager'")


def attention_forward(module, query, key, value, attention_mask,
                      dropout=0.0, scaling=None, sliding_window=None,
                      softcap=None, is_causal=None, s_aux=None, **kwargs):
    """transformers' attention function signature: query [B, Hq, Q, D], key
    and value [B, Hk, K, D]; returns (attn_output [B, Q, Hq, Dv], None).

    `attention_mask`: None, the 2-D key mask of `attention_mask()` above (or
    any 2-D 1 = valid mask, flash-attention convention), or a 4-D boolean or
    additive mask that must be plain causal / sliding-window / bidirectional
    over padded sequences (checked; ValueError otherwise)."""
    if dropout:
        raise ValueError(
            f"dropout: attn_mlir runs inference only, got dropout={dropout} "
            f"(call model.eval())")
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise ValueError(f"attn_mlir: expected query [B, H, Q, D] and key/"
                         f"value [B, Hk, K, D], got {tuple(query.shape)}, "
                         f"{tuple(key.shape)}, {tuple(value.shape)}")
    batch, heads, q_len, dim = query.shape
    kv_heads, k_len = key.shape[1], key.shape[2]
    if heads % kv_heads or value.shape[1] != kv_heads:
        raise ValueError(f"attn_mlir: {heads} query heads and {kv_heads} KV "
                         f"heads (value: {value.shape[1]}); GQA needs the KV "
                         f"head count to divide the query head count")
    if not (key.dtype == value.dtype == query.dtype):
        raise ValueError(f"attn_mlir: query, key and value dtypes differ: "
                         f"{query.dtype}, {key.dtype}, {value.dtype}")
    causal = is_causal if is_causal is not None else \
        getattr(module, "is_causal", True)
    causal = bool(causal)
    window = int(sliding_window) if sliding_window is not None else None
    if window is not None and not causal:
        raise NotImplementedError(
            "attn_mlir: bidirectional sliding-window attention is not "
            "supported")
    kinds = getattr(attention_mask, "_attn_mlir_kinds", None)
    if kinds is not None and not _layer_matches(kinds, causal, window,
                                                k_len):
        raise ValueError(
            f"attention_mask: built for {sorted(kinds, key=str)}, but the "
            f"layer asks for causal={causal}, sliding_window={window}")
    scale = float(scaling) if scaling is not None else dim ** -0.5
    plan = _plan(attention_mask, batch, q_len, k_len, causal, window,
                 query.device)
    if window is not None and not plan.contiguous:
        raise ValueError("attention_mask: with a sliding window attn_mlir "
                         "needs each sequence's valid keys to be one run "
                         "(padding only before or after)")

    def run(q, k, v):
        return _attend(q, k, v, plan, causal=causal, window=window,
                       softcap=softcap, sinks=s_aux, scale=scale)

    if torch.is_grad_enabled() and any(
            t.requires_grad for t in (query, key, value)):
        out = _NoBackward.apply(query, key, value, run)
    else:
        out = run(query, key, value)
    return out, None


def _layer_matches(kinds, causal, window, k_len):
    if not causal:
        return ("bidirectional", None) in kinds
    if window is None or window >= k_len:
        # A window wider than every key changes nothing.
        if ("causal", None) in kinds:
            return True
    return ("causal", window) in kinds


def _attend(query, key, value, plan, *, causal, window, softcap, sinks,
            scale):
    batch, heads, q_len, dim = query.shape
    k_len = key.shape[2]
    v_dim = value.shape[3]
    if v_dim < dim:
        # The kernels take one head dim: pad v (MLA) and crop the output.
        value = torch.nn.functional.pad(value, (0, dim - v_dim))
    elif v_dim > dim:
        raise ValueError(f"attn_mlir: value head dim {v_dim} exceeds the "
                         f"query's {dim}")
    # [B, H, S, D] -> [B, S, H, D]: the kernels' token-major layout.
    q = query.transpose(1, 2)
    k = key.transpose(1, 2)
    v = value.transpose(1, 2)
    q = q[plan.qsel] if plan.qsel is not None else \
        q.reshape(batch * q_len, heads, dim)
    q = q.contiguous()
    out = torch.empty_like(q)
    if window is None and softcap is None and sinks is None:
        if plan.ksel is not None:
            k, v = k[plan.ksel], v[plan.ksel]
        else:
            k = k.reshape(batch * k_len, *k.shape[2:])
            v = v.reshape(batch * k_len, *v.shape[2:])
        ops.flash(q, k.contiguous(), v.contiguous(), plan.cu_q, plan.cu_k,
                  out, scale=scale, causal=causal)
    else:
        _unified(q, k, v, out, plan, causal=causal, window=window,
                 softcap=softcap, sinks=sinks, scale=scale)
    if plan.qsel is None:
        out = out.view(batch, q_len, heads, dim)
    else:
        full = out.new_zeros(batch, q_len, heads, dim)
        full[plan.qsel] = out
        out = full
    return out[..., :v_dim] if v_dim < dim else out


def _unified(q, k, v, out, plan, *, causal, window, softcap, sinks, scale):
    """ops.unified over a dense paged copy of the valid keys: sequence b's
    keys fill pages [b * P, (b + 1) * P) in order (P pages of PAGE_SIZE)."""
    batch, k_len = k.shape[0], k.shape[1]
    pages = max(1, -(-plan.max_k // PAGE_SIZE))
    slots = torch.arange(pages * PAGE_SIZE, device=k.device)
    if plan.ksel is None:
        pos = slots.clamp(max=max(k_len - 1, 0)).expand(batch, -1)
    else:
        # Key positions of each sequence's valid keys, in order, first: a
        # stable sort puts the True entries of ksel ahead of the False.
        order = torch.sort((~plan.ksel).to(torch.uint8), dim=1,
                           stable=True).indices
        if order.shape[1] < slots.numel():
            order = torch.cat([order, order.new_zeros(
                batch, slots.numel() - order.shape[1])], dim=1)
        pos = order[:, :slots.numel()]
    rows = torch.arange(batch, device=k.device)[:, None]
    shape = (batch * pages, PAGE_SIZE) + tuple(k.shape[2:])
    k_cache = k[rows, pos].reshape(shape).contiguous()
    v_cache = v[rows, pos].reshape(shape).contiguous()
    table = torch.arange(batch * pages, dtype=torch.int32,
                         device=k.device).view(batch, pages)
    if sinks is not None:
        sinks = sinks.detach().to(device=q.device,
                                  dtype=torch.float32).contiguous()
    if not causal and bool((plan.cu_q.diff() > plan.lk).any()):
        raise ValueError("attn_mlir: unified attention (window, softcap, "
                         "sinks) needs at least as many keys as queries per "
                         "sequence")
    ops.unified(q, k_cache, v_cache, table, plan.cu_q, plan.lk, out,
                scale=scale, softcap=softcap, sliding_window=window,
                sinks=sinks, causal=causal)


# ---------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------

def register():
    """Registers `attention_forward` and `attention_mask` as "attn_mlir"
    (done on import; idempotent)."""
    AttentionInterface.register(NAME, attention_forward)
    AttentionMaskInterface.register(NAME, attention_mask)


register()

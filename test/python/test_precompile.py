"""attn_mlir.precompile: every kernel a model's attention needs, compiled
before serving, so that serving never compiles after warm-up."""
import json
import re

import numpy as np
import pytest
from ml_dtypes import bfloat16

from attn_mlir import _toolchain, aot, ops, precompile, vllm
from attn_mlir.precompile import AttentionConfig
from reference import needs_cpu_kernels
from test_cache_integrity import nvvm  # noqa: F401 (a fixture)


def names(texts):
    return [re.search(r"func\.func @(\w+)\(", t)[1] for t in texts]


def test_specializations_of_a_config():
    cfg = AttentionConfig(num_q_heads=8, num_kv_heads=2, head_dim=64)
    got = names(precompile.specializations(cfg))
    # One pass, its forms for mixed batches (a decode op and a prefill-rows
    # op: min_query_len) and prefill batches (the long-queries and
    # prefill-rows hints), the split-KV kernel for every segment count the
    # plan picks (the count is read at run time) that merges its segments
    # itself, over short segments (the stream-pages hint) and long ones,
    # and a mixed batch over long contexts, whose decode op splits.
    assert got == ["attn_unified_bf16_d64_h8_gqa4",
                   "attn_unified_bf16_d64_h8_gqa4_prefill_mixed",
                   "attn_unified_bf16_d64_h8_gqa4_long_prefill",
                   "attn_unified_bf16_d64_h8_gqa4_split_merged_stream",
                   "attn_unified_bf16_d64_h8_gqa4_split_merged",
                   "attn_unified_bf16_d64_h8_gqa4_split_prefill_seqsplit"
                   "_mixed"]
    # Heads of 96 take neither hint.
    d96 = AttentionConfig(num_q_heads=32, num_kv_heads=8, head_dim=96,
                          split_kv=False)
    assert names(precompile.specializations(d96)) == [
        "attn_unified_bf16_d96_h32_gqa4"]
    one = AttentionConfig(8, 2, 64, split_kv=False, kv_cache_dtype="fp8",
                          sliding_window=32, softcap=20.0, sinks=True)
    # fp8 caches: decode batches take the decode-rows hint (sm_90a: warps
    # splitting the keys), mixed batches a decode op and a prefill-rows op
    # (min_query_len), prefill batches the prefill-rows hint (sm_90a: the
    # gathering producer, which dequantizes the pages' bytes).
    assert names(precompile.specializations(one)) == [
        "attn_unified_bf16_d64_h8_gqa4_kvf8e4m3fn_window_decode_softcap_sinks",
        "attn_unified_bf16_d64_h8_gqa4_kvf8e4m3fn_window_prefill_decode_mixed"
        "_softcap_sinks",
        "attn_unified_bf16_d64_h8_gqa4_kvf8e4m3fn_window_prefill_softcap_sinks"]


def test_collecting_runs_nothing():
    """Inside collect_specializations nothing is written (a dry run)."""
    q = np.full((4, 2, 32), 7, bfloat16)
    out = np.full_like(q, 3)
    cu = np.array([0, 4], np.int32)
    with ops.collect_specializations() as texts:
        ops.flash(q, q, q, cu, cu, out, scale=0.1)
    assert len(texts) == 1 and (out == 3).all()


@needs_cpu_kernels
def test_serving_never_compiles_after_precompile(monkeypatch, tmp_path):
    """After precompile(chip="cpu"), prefill, short decode and split-KV
    decode calls of that config find every kernel in the cache."""
    monkeypatch.setenv("ATTN_MLIR_CACHE", str(tmp_path))
    _toolchain._loaded.clear()
    cfg = AttentionConfig(num_q_heads=4, num_kv_heads=2, head_dim=32,
                          dtype="float32", block_size=16)
    # One pass and split-KV (merging its own segments) over short segments
    # (the stream-pages hint) and long ones; f32 takes no other hint.
    assert precompile.precompile([cfg], chip="cpu") == 3
    _toolchain._loaded.clear()  # a new process: only the disk cache

    def no_build(*a):
        raise AssertionError("compiled after precompile")
    monkeypatch.setattr(_toolchain, "_build", no_build)
    rng = np.random.default_rng(0)
    # (The last: a split of long segments, as a long context's plan of two
    # segments, on small arrays: max_seqlen_k is the bound.)
    for batch, per_seq, context, max_k, segments in (
            (2, 5, 40, 40, None), (3, 1, 33, 33, None),
            (2, 1, 2000, 2000, None), (2, 1, 300, 1 << 16, 2)):
        pages = -(-context // 16)
        q = rng.standard_normal((batch * per_seq, 4, 32)).astype(np.float32)
        cache = rng.standard_normal((batch * pages, 16, 2, 32)).astype(
            np.float32)
        out = np.full_like(q, np.nan)
        vllm.unified_attention(
            q, cache, cache, out,
            np.arange(0, batch * per_seq + 1, per_seq, dtype=np.int32),
            per_seq, np.full(batch, context, np.int32), max_k, 0.17, True,
            None, np.arange(batch * pages, dtype=np.int32).reshape(batch, -1),
            None, None, None, None, num_segments=segments)
        assert np.isfinite(out).all()


def test_bad_configs_name_the_field():
    with pytest.raises(ValueError, match="unknown field.*heads"):
        AttentionConfig.from_dict({"num_q_heads": 8, "num_kv_heads": 2,
                                   "head_dim": 64, "heads": 3})
    with pytest.raises(ValueError, match="dtype: 'float64'"):
        precompile.specializations(AttentionConfig(8, 2, 64, dtype="float64"))
    with pytest.raises(ValueError, match="kv_cache_dtype: 'fp8_x'"):
        precompile.specializations(
            AttentionConfig(8, 2, 64, kv_cache_dtype="fp8_x"))
    with pytest.raises(ValueError, match="k: 3 KV heads must divide"):
        precompile.specializations(AttentionConfig(8, 3, 64))
    with pytest.raises(ValueError, match="out: AOT bundles are for GPU"):
        precompile.precompile([AttentionConfig(8, 2, 64)], out="x")


def test_aot_from_a_model_description(nvvm, tmp_path):  # noqa: F811
    """python -m attn_mlir.aot --model: bundles for every kernel of the
    configuration, without recording a run."""
    model = tmp_path / "model.json"
    model.write_text(json.dumps([{"num_q_heads": 8, "num_kv_heads": 2,
                                  "head_dim": 64, "split_kv": False}]))
    assert aot.main(["--chip", "sm_80", "--model", str(model), "--out",
                     str(tmp_path / "b")]) == 0
    bundles = [p for p in (tmp_path / "b").iterdir() if p.is_dir()]
    # Decode, mixed (a decode op and a prefill-rows op) and prefill batches
    # (prefill rows).
    assert len(bundles) == 3
    texts = sorted(json.loads((b / "manifest.json").read_text())["mlir"]
                   for b in bundles)
    names_ = sorted(re.search(r"func\.func @(\w+)\(", t)[1] for t in texts)
    assert names_ == ["attn_unified_bf16_d64_h8_gqa4",
                      "attn_unified_bf16_d64_h8_gqa4_long_prefill",
                      "attn_unified_bf16_d64_h8_gqa4_prefill_mixed"]

"""Random paged KV caches in vLLM's layouts, for the tests."""

import numpy as np

from reference import DTYPES, F8


def cache_values(rng, shape, dtype, fp8):
    """Values as stored: fp8 caches as uint8 storage, like vLLM passes them."""
    if fp8:
        vals = rng.standard_normal(shape).astype(F8[fp8])
        return vals, vals.view(np.uint8)
    vals = rng.standard_normal(shape).astype(DTYPES[dtype])
    return vals, vals


def block_table(rng, keys_per_seq, block_size, extra_blocks=3):
    """A shuffled block table: every sequence gets distinct physical blocks."""
    need = [-(-int(n) // block_size) for n in keys_per_seq]
    num_blocks = sum(need) + extra_blocks
    perm = rng.permutation(num_blocks)
    width = max(need + [1])
    table = np.zeros((len(need), width), np.int32)
    pos = 0
    for b, n in enumerate(need):
        table[b, :n] = perm[pos:pos + n]
        pos += n
    return table, num_blocks

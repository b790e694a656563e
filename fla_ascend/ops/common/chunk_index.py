"""Task-index helpers inlined into the chunk kernels (one definition, used by every stage)."""
import triton
import triton.language as tl


@triton.jit
def chunk_bounds(i_c, chunk_indices, cu_seqlens, T, NT, IS_VARLEN: tl.constexpr):
    """Sequence ``i_n``, chunk-in-sequence ``i_t`` and global token bounds ``bos``/``eos``
    (int64) of global chunk ``i_c``. Tokens are indexed over the flattened ``B * T`` axis."""
    i_c = tl.cast(i_c, tl.int64)
    if IS_VARLEN:
        i_n = tl.load(chunk_indices + i_c * 2).to(tl.int64)
        i_t = tl.load(chunk_indices + i_c * 2 + 1).to(tl.int64)
        bos = tl.load(cu_seqlens + i_n).to(tl.int64)
        eos = tl.load(cu_seqlens + i_n + 1).to(tl.int64)
    else:
        i_n = i_c // NT
        i_t = i_c % NT
        bos = i_n * T
        eos = bos + T
    return i_n, i_t, bos, eos


@triton.jit
def seq_bounds(i_n, cu_seqlens, chunk_offsets, T, NT, IS_VARLEN: tl.constexpr):
    """Token bounds ``bos``/``eos`` and first global chunk ``boc`` (int64) of sequence ``i_n``."""
    i_n = tl.cast(i_n, tl.int64)
    if IS_VARLEN:
        bos = tl.load(cu_seqlens + i_n).to(tl.int64)
        eos = tl.load(cu_seqlens + i_n + 1).to(tl.int64)
        boc = tl.load(chunk_offsets + i_n).to(tl.int64)
    else:
        bos = i_n * T
        eos = bos + T
        boc = i_n * NT
    return bos, eos, boc

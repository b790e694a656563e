"""Varlen index preparation: which (sequence, chunk) each chunk task covers."""
from __future__ import annotations

import torch


def prepare_chunk_indices(
    cu_seqlens: torch.Tensor, chunk_size: int, cu_seqlens_cpu: torch.Tensor | None = None,
) -> torch.Tensor:
    """Chunk tasks of a packed varlen batch.

    Args:
        cu_seqlens: ``[N + 1]`` int sequence boundaries (validated).
        chunk_size: tokens per chunk.
        cu_seqlens_cpu: the same boundaries on the host, or ``None``. When given, the rows are
            built on the host and copied to the device (no device-to-host synchronisation; without
            it the row count is read back from the device).

    Returns:
        ``[NT, 2]`` int32 on ``cu_seqlens``' device: row ``j`` is ``(i_n, i_t)``, the sequence
        and the chunk within it. Empty sequences contribute no rows.
    """
    if cu_seqlens_cpu is not None:
        return prepare_chunk_indices(cu_seqlens_cpu, chunk_size).to(cu_seqlens.device, non_blocking=True)
    lens = (cu_seqlens[1:] - cu_seqlens[:-1]).long()
    n_chunks = (lens + chunk_size - 1) // chunk_size
    i_n = torch.repeat_interleave(torch.arange(lens.numel(), device=cu_seqlens.device), n_chunks)
    starts = torch.cumsum(n_chunks, 0) - n_chunks
    i_t = torch.arange(i_n.numel(), device=cu_seqlens.device) - starts[i_n]
    return torch.stack([i_n, i_t], 1).to(torch.int32).contiguous()


def prepare_chunk_offsets(cu_seqlens: torch.Tensor, chunk_size: int) -> torch.Tensor:
    """``[N + 1]`` int64 cumulative chunk counts: chunk ``j`` of sequence ``n`` is row
    ``offsets[n] + j`` of per-chunk tensors (such as the chunk-start states ``h``)."""
    lens = (cu_seqlens[1:] - cu_seqlens[:-1]).long()
    n_chunks = (lens + chunk_size - 1) // chunk_size
    return torch.cat([n_chunks.new_zeros(1), torch.cumsum(n_chunks, 0)])

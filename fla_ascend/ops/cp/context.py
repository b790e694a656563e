"""``build_cp_context``: how a packed batch is split across the ranks of a context-parallel group.

The global batch (``T`` tokens, boundaries ``cu_seqlens``) is cut into equal parts of ``part_len``
tokens, numbered 0, 1, ... in token order (their *slots* in the state chain). Layouts, as in
flash-linear-attention 0.6.0's ``fla.ops.cp.build_cp_context``:

- ``'contiguous'``: ``world`` parts; rank ``r`` holds part ``r``.
- ``'zigzag'``: ``2 * world`` parts; rank ``r`` holds parts ``r`` and ``2 * world - 1 - r``,
  concatenated ``[front; back]`` in its local buffer (balances the causal work).

Within a rank the local tokens are cut at every global sequence boundary and at the part boundary,
giving the local ``cu_seqlens`` the ops run on. Each part records where its first sequence started
(how many parts before it the sequence began: ``pre_num_ranks``, and how many tokens:
``pre_num_conv_tokens``) and where its last sequence ends (``post_num_ranks`` parts later).
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import torch
import torch.distributed as dist

from fla_ascend.ops.cp.comm import comm_device
from fla_ascend.ops.utils.validation import MAX_CONV_WIDTH as MAX_W
from fla_ascend.ops.utils.validation import check_cu_seqlens

LAYOUTS = ("contiguous", "zigzag")


@dataclass(frozen=True)
class CPPart:
    """One part of the global token axis held by this rank.

    Attributes:
        slot: the part's position in the global chain (``0 .. n_parts - 1``).
        offset: first local token of the part (0, or ``part_len`` for zigzag's back part).
        first_seq, last_seq: local sequence indices (into the context's ``cu_seqlens``) of the
            part's first and last sequence.
        first_seq_end, last_seq_start: local token bounds: the first sequence's end within the part
            and the last sequence's start.
        pre_num_ranks: how many parts before this one the first sequence started (0: it starts here).
        post_num_ranks: how many parts after this one the last sequence ends (0: it ends here).
        pre_num_conv_tokens: tokens of the first sequence before this part.
    """
    slot: int
    offset: int
    first_seq: int
    last_seq: int
    first_seq_end: int
    last_seq_start: int
    pre_num_ranks: int
    post_num_ranks: int
    pre_num_conv_tokens: int


@dataclass(frozen=True)
class FLACPContext:
    """Context-parallel metadata of one rank (build it with :func:`build_cp_context`).

    Attributes:
        group: the ``torch.distributed`` process group.
        cu_seqlens: ``[N_local + 1]`` int32 local boundaries on the device of the global ``cu_seqlens``;
            cu_seqlens_cpu: the same on the host.
        conv1d_kernel_size: the ``W`` :func:`fla_ascend.ops.causal_conv1d` may be called with, or ``None``.
        layout: ``'contiguous'`` or ``'zigzag'``.
        world_size, rank: of ``group`` at build time.
        part_len: tokens per part; a rank holds ``part_len * len(parts)`` tokens.
        total_tokens: global ``T``.
        parts: this rank's :class:`CPPart` (one, or two for zigzag: front then back).
    """
    group: object
    cu_seqlens: torch.Tensor
    cu_seqlens_cpu: torch.Tensor
    conv1d_kernel_size: int | None
    layout: str
    world_size: int
    rank: int
    part_len: int
    total_tokens: int
    parts: tuple[CPPart, ...]

    @property
    def n_parts(self) -> int:
        """Parts in the global chain: ``world_size`` (contiguous) or ``2 * world_size`` (zigzag)."""
        return self.world_size * len(self.parts)

    @property
    def local_len(self) -> int:
        """Tokens this rank holds."""
        return self.part_len * len(self.parts)

    @property
    def num_seqs(self) -> int:
        """Sequences in this rank's local batch."""
        return self.cu_seqlens_cpu.numel() - 1

    @property
    def is_cp_enabled(self) -> bool:
        return self.group is not None

    # flash-linear-attention's per-rank scalars (contiguous layout) and per-part tuples (zigzag)
    @property
    def pre_num_ranks(self) -> int:
        return self.parts[0].pre_num_ranks

    @property
    def post_num_ranks(self) -> int:
        return self.parts[-1].post_num_ranks

    @property
    def is_first_rank(self) -> bool:
        return self.parts[0].pre_num_ranks == 0

    @property
    def is_last_rank(self) -> bool:
        return self.parts[-1].post_num_ranks == 0

    @property
    def pre_num_conv_tokens(self) -> int:
        return self.parts[0].pre_num_conv_tokens

    @property
    def pre_num_ranks_by_part(self) -> tuple[int, ...]:
        return tuple(p.pre_num_ranks for p in self.parts)

    @property
    def post_num_ranks_by_part(self) -> tuple[int, ...]:
        return tuple(p.post_num_ranks for p in self.parts)

    @property
    def front_num_seqs(self) -> int:
        return self.parts[0].last_seq + 1


def _part(cu: list[int], slot: int, part_len: int, offset: int, first_seq: int) -> tuple[CPPart, list[int]]:
    """The :class:`CPPart` of global tokens ``[slot * part_len, (slot + 1) * part_len)`` and its local
    boundaries (relative to the part, without the leading 0)."""
    a, b = slot * part_len, (slot + 1) * part_len
    inner = sorted({c - a for c in cu if a < c < b})
    bounds = inner + [part_len]
    # the sequence holding token a: the last boundary <= a (empty sequences skipped)
    seq_start = max(c for c in cu if c <= a)
    seq_end = min(c for c in cu if c >= b)
    last_start = inner[-1] if inner else 0
    part = CPPart(
        slot=slot, offset=offset, first_seq=first_seq, last_seq=first_seq + len(bounds) - 1,
        first_seq_end=offset + bounds[0], last_seq_start=offset + last_start,
        pre_num_ranks=slot - seq_start // part_len, post_num_ranks=(seq_end - 1) // part_len - slot,
        pre_num_conv_tokens=a - seq_start,
    )
    return part, [offset + x for x in bounds]


def _check_same_across_ranks(cu: torch.Tensor, group, world: int, device: torch.device) -> None:
    """Raise on every rank when the ranks passed different global ``cu_seqlens`` (two all_gathers:
    the lengths, then the values)."""
    n = torch.tensor([cu.numel()], dtype=torch.int64, device=device)
    sizes = [torch.empty_like(n) for _ in range(world)]
    dist.all_gather(sizes, n, group=group)
    sizes = [int(s) for s in sizes]
    if len(set(sizes)) == 1:
        vals = [torch.empty(sizes[0], dtype=torch.int64, device=device) for _ in range(world)]
        dist.all_gather(vals, cu.to(device=device, dtype=torch.int64), group=group)
        differ = [r for r in range(world) if not torch.equal(vals[r].cpu(), vals[0].cpu())]
    else:
        differ = [r for r in range(world) if sizes[r] != sizes[0]]
    if differ:
        raise ValueError(f"build_cp_context: cu_seqlens must be the same global boundaries on every rank of the "
                         f"group; ranks {differ} differ from rank 0 (lengths {sizes})")


def build_cp_context(
    cu_seqlens: torch.Tensor,
    group,
    conv1d_kernel_size: int | None = None,
    cu_seqlens_cpu: torch.Tensor | None = None,
    layout: str = "contiguous",
    **kwargs,
) -> FLACPContext:
    """Split a packed batch across the ranks of ``group`` (flash-linear-attention 0.6.0's
    ``fla.ops.cp.build_cp_context``: same arguments and meaning).

    Every rank calls it with the same global ``cu_seqlens``; it is a collective (two small
    ``all_gather`` calls check that the ranks agree). Each rank then passes its local slice of the
    tokens (``[1, part_len * parts, ...]``: its part, or zigzag's front and back parts concatenated)
    with ``cp_context=`` to :func:`fla_ascend.ops.chunk_gated_delta_rule` and
    :func:`fla_ascend.ops.causal_conv1d`.

    Args:
        cu_seqlens: ``[N + 1]`` int32/int64 global boundaries (starting at 0, non-decreasing, ending
            at the global ``T``), identical on every rank. Sequences may span any number of ranks,
            be shorter than a rank's slice, or be empty.
        group: the ``torch.distributed`` process group (world size 1 is allowed).
        conv1d_kernel_size: ``W`` of the convolution this context will serve (required by
            ``causal_conv1d``), or ``None``.
        cu_seqlens_cpu: a host copy of ``cu_seqlens`` (saves a device-to-host copy).
        layout: ``'contiguous'`` (rank ``r`` holds part ``r`` of ``world``) or ``'zigzag'`` (rank
            ``r`` holds parts ``r`` and ``2 * world - 1 - r`` of ``2 * world``).
        **kwargs: ``use_tf32x3_affine_chain=True`` is accepted (flash-linear-attention's legacy flag;
            the chain here always runs at fp32 accuracy); anything else raises ``TypeError``.

    Returns:
        :class:`FLACPContext`.

    Raises (messages start with ``build_cp_context:``):
        TypeError: unknown keyword arguments, a non-integer ``cu_seqlens`` or ``conv1d_kernel_size``.
        ValueError: unknown ``layout``; ``cu_seqlens`` not valid boundaries, or differing across ranks;
            ``T`` below or not divisible by the number of parts (``world`` or ``2 * world``);
            ``conv1d_kernel_size`` outside ``[1, 16]``; ``use_tf32x3_affine_chain=False``.
    """
    name = "build_cp_context"
    tf32x3 = kwargs.pop("use_tf32x3_affine_chain", True)
    if kwargs:
        raise TypeError(f"{name}: unexpected keyword arguments {sorted(kwargs)}")
    if tf32x3 is not True:
        raise ValueError(f"{name}: use_tf32x3_affine_chain must be True (the chain always runs at fp32 accuracy), "
                         f"got {tf32x3!r}")
    if layout not in LAYOUTS:
        raise ValueError(f"{name}: layout must be one of {LAYOUTS}, got {layout!r}")
    if conv1d_kernel_size is not None:
        if not isinstance(conv1d_kernel_size, numbers.Integral) or isinstance(conv1d_kernel_size, bool):
            raise TypeError(f"{name}: conv1d_kernel_size must be an int or None, got {conv1d_kernel_size!r}")
        if not 1 <= conv1d_kernel_size <= MAX_W:
            raise ValueError(f"{name}: conv1d_kernel_size must be in [1, {MAX_W}], got {conv1d_kernel_size}")
        conv1d_kernel_size = int(conv1d_kernel_size)
    host = cu_seqlens_cpu if cu_seqlens_cpu is not None else cu_seqlens
    if not isinstance(host, torch.Tensor) or host.dim() != 1 or host.numel() < 2:
        raise ValueError(f"{name}: cu_seqlens must be a 1-D tensor with N + 1 >= 2 entries, got "
                         f"{type(host).__name__ if not isinstance(host, torch.Tensor) else tuple(host.shape)}")
    if host.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"{name}: cu_seqlens must have an integer dtype (int32 or int64), got {host.dtype}")
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    cu = host.detach().cpu().to(torch.int64)
    # first, so that every rank raises the same error (a rank raising alone would leave the others in a collective)
    _check_same_across_ranks(cu, group, world, comm_device(group, cu_seqlens.device))
    T = int(host[-1])
    try:
        check_cu_seqlens(host, 1, T)
    except (TypeError, ValueError) as e:
        raise type(e)(f"{name}: {e}") from None
    per_rank = 1 if layout == "contiguous" else 2
    n_parts = world * per_rank
    if T < n_parts or T % n_parts:
        raise ValueError(f"{name}: the global T (cu_seqlens[-1]) must be a positive multiple of the number of parts "
                         f"({n_parts}: {'world' if per_rank == 1 else '2 * world'} with world={world}, "
                         f"layout={layout!r}), got T={T}")
    part_len = T // n_parts
    slots = [rank] if layout == "contiguous" else [rank, 2 * world - 1 - rank]
    cu_list = cu.tolist()
    parts, local = [], [0]
    for i, slot in enumerate(slots):
        part, bounds = _part(cu_list, slot, part_len, offset=i * part_len, first_seq=len(local) - 1)
        parts.append(part)
        local += bounds
    local_cpu = torch.tensor(local, dtype=torch.int32)
    return FLACPContext(
        group=group, cu_seqlens=local_cpu.to(cu_seqlens.device), cu_seqlens_cpu=local_cpu,
        conv1d_kernel_size=conv1d_kernel_size, layout=layout, world_size=world, rank=rank,
        part_len=part_len, total_tokens=T, parts=tuple(parts),
    )


def check_cp_call(op: str, ctx: object, x: object, initial_state: object = None,
                  output_final_state: object = False) -> torch.Tensor:
    """Validate an op's ``cp_context`` against its input ``x`` ``[B, T, ...]``, the group's current size
    and flash-linear-attention's restrictions; returns the local ``cu_seqlens`` the op runs on
    (overriding the caller's, as flash-linear-attention does). A non-tensor ``x`` is left to the op's
    own validation.

    Raises:
        TypeError: ``ctx`` is not a :class:`FLACPContext`.
        NotImplementedError: ``initial_state`` given or ``output_final_state`` set (not supported under
            context parallelism, as in flash-linear-attention).
        ValueError: the group's size or this rank's index changed since the context was built; ``B != 1``;
            ``T`` not the context's local length.
    """
    if not isinstance(ctx, FLACPContext):
        raise TypeError(f"{op}: cp_context must be an FLACPContext from fla_ascend.ops.cp.build_cp_context, "
                        f"got {type(ctx).__name__}")
    if initial_state is not None:
        raise NotImplementedError(f"{op}: initial_state is not supported with cp_context (the start states come "
                                  "from the other ranks)")
    if output_final_state:
        raise NotImplementedError(f"{op}: output_final_state is not supported with cp_context")
    world, rank = dist.get_world_size(ctx.group), dist.get_rank(ctx.group)
    if (world, rank) != (ctx.world_size, ctx.rank):
        raise ValueError(f"{op}: cp_context was built for group size {ctx.world_size} (rank {ctx.rank}), but its "
                         f"group now has size {world} (rank {rank})")
    if not isinstance(x, torch.Tensor) or x.dim() < 2:
        return ctx.cu_seqlens
    B, T = x.shape[:2]
    if B != 1:
        raise ValueError(f"{op}: under context parallelism the batch must be packed (B == 1), got B={B}")
    if T != ctx.local_len:
        raise ValueError(f"{op}: this rank must hold T={ctx.local_len} tokens ({len(ctx.parts)} part(s) of "
                         f"{ctx.part_len}, layout {ctx.layout!r}), got T={T}")
    return ctx.cu_seqlens

"""Helpers shared by the ops: input validation, varlen index preparation, accuracy metric."""
from fla_ascend.ops.utils.index import prepare_chunk_indices, prepare_chunk_offsets
from fla_ascend.ops.utils.metric import rel_rmse
from fla_ascend.ops.utils.validation import (
    FLOAT_DTYPES,
    check_bool,
    check_bools,
    check_cu_seqlens,
    check_eps,
    check_same_device,
    check_tensor,
    check_varlen,
    op_errors,
)

__all__ = [
    "FLOAT_DTYPES",
    "check_bool",
    "check_bools",
    "check_cu_seqlens",
    "check_eps",
    "check_same_device",
    "check_tensor",
    "check_varlen",
    "op_errors",
    "prepare_chunk_indices",
    "prepare_chunk_offsets",
    "rel_rmse",
]

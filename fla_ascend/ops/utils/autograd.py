"""Autograd rules shared by the ops: their backwards are Triton kernels, not differentiable
torch ops, and the decode ops have no backward at all."""
from __future__ import annotations

import functools

import torch


def kernel_backward(op: str):
    """Decorate an ``autograd.Function.backward`` made of kernels: it refuses to run with grad
    mode on (``create_graph=True``), where its outputs would silently carry no second-order
    terms (a gradient penalty would get a wrong gradient, not an error).

    Raises (from the decorated backward):
        RuntimeError: ``"<op>: double backward ... is not supported"`` under ``create_graph=True``.
    """
    def wrap(backward):
        @functools.wraps(backward)
        def checked(ctx, *grads):
            if torch.is_grad_enabled():
                raise RuntimeError(f"{op}: double backward (torch.autograd.grad or backward with create_graph=True) "
                                   "is not supported: its backward is made of Triton kernels, not differentiable "
                                   "ops")
            return backward(ctx, *grads)
        return checked
    return wrap


def check_forward_only(op: str, hint: str, **tensors: torch.Tensor | None) -> None:
    """Refuse a forward-only op's call while grad mode is on and an input requires grad, naming
    the inputs; ``hint`` says what to use instead.

    Raises:
        RuntimeError: ``"<op> is forward only (<inputs> require grad); <hint>"``.
    """
    if not torch.is_grad_enabled():
        return
    needing = [name for name, t in tensors.items() if t is not None and t.requires_grad]
    if needing:
        raise RuntimeError(f"{op} is forward only ({', '.join(needing)} require{'s' if len(needing) == 1 else ''} "
                           f"grad); {hint}")

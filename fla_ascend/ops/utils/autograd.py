"""Autograd rules shared by the ops: their backwards are Triton kernels, not differentiable
torch ops."""
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

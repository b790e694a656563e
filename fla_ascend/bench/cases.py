"""Benchmark cases: named shapes, ``--shapes`` parsing and the op registry.

An op is one :class:`OpSpec` entry in :data:`OPS`: which shape dimensions it needs, how to
build deterministic inputs, the float32 PyTorch reference its correctness gate compares with,
the providers that compute it (``fla_ascend``, ``torch_ref``, ``fla``), and the bytes and
flops one call moves and does (for achieved GB/s and TFLOP/s). Adding an op is adding one
entry.

Shapes are plain dicts of upper-case dimension names to ints (``{"B": 1, "T": 4096, ...}``);
:func:`shape_key` turns one into the stable string key used in the JSON artifact
(``"B1-T4096-H16-HV32-K128-V128"``).
"""
from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

__all__ = [
    "NAMED_SHAPES",
    "SHAPE_GROUPS",
    "DIM_ORDER",
    "OPS",
    "OpSpec",
    "parse_shapes",
    "shape_key",
    "scale_for_cpu",
    "fla_available",
    "fla_version",
]

# Dimension names in key order. D is the conv channel count (GDN shapes use K and V).
DIM_ORDER = ("B", "T", "H", "HV", "K", "V", "D", "W")

# The anchor shapes (docs/bench.md, "Shapes"; flash-linear-attention 0.6.0 measured at them on the
# H200 in benchmarks/results/results.csv) and flash-linear-attention's own default benchmark list,
# (B, T, H, D) with HV = H, K = V = D. Keys are what `--shapes` accepts.
NAMED_SHAPES: dict[str, dict[str, int]] = {
    # GatedDeltaNet prefill anchors; the first is Qwen3-Next's layer shape.
    "qwen3next": dict(B=1, T=4096, H=16, HV=32, K=128, V=128),
    "gdn-b4-t4096": dict(B=4, T=4096, H=16, HV=16, K=128, V=128),
    "gdn-t32k": dict(B=1, T=32768, H=16, HV=32, K=128, V=128),
    "gdn-b8-t2048": dict(B=8, T=2048, H=32, HV=32, K=128, V=128),
    # decode anchors (T = 1, fp32 state in and out)
    "decode-b64": dict(B=64, T=1, H=16, HV=32, K=128, V=128),
    "decode-b256": dict(B=256, T=1, H=16, HV=32, K=128, V=128),
    # causal_conv1d anchors (silu, bias)
    "conv-b4-t4096": dict(B=4, T=4096, D=4096, W=4),
    "conv-t32k": dict(B=1, T=32768, D=8192, W=4),
    # flash-linear-attention's default benchmark list
    "fla-b1-t8192-h96-d128": dict(B=1, T=8192, H=96, HV=96, K=128, V=128),
    "fla-b2-t16384-h16-d128": dict(B=2, T=16384, H=16, HV=16, K=128, V=128),
    "fla-b4-t2048-h16-d128": dict(B=4, T=2048, H=16, HV=16, K=128, V=128),
    "fla-b4-t4096-h64-d128": dict(B=4, T=4096, H=64, HV=64, K=128, V=128),
    "fla-b8-t2048-h32-d256": dict(B=8, T=2048, H=32, HV=32, K=256, V=256),
    "fla-b8-t1024-h8-d64": dict(B=8, T=1024, H=8, HV=8, K=64, V=64),
}
NAMED_SHAPES["default"] = NAMED_SHAPES["qwen3next"]

SHAPE_GROUPS: dict[str, list[str]] = {
    "gdn-anchors": ["qwen3next", "gdn-b4-t4096", "gdn-t32k", "gdn-b8-t2048"],
    "decode-anchors": ["decode-b64", "decode-b256"],
    "conv-anchors": ["conv-b4-t4096", "conv-t32k"],
    "fla-defaults": [k for k in NAMED_SHAPES if k.startswith("fla-")],
}
SHAPE_GROUPS["anchors"] = SHAPE_GROUPS["gdn-anchors"] + SHAPE_GROUPS["decode-anchors"] + SHAPE_GROUPS["conv-anchors"]
SHAPE_GROUPS["all"] = SHAPE_GROUPS["anchors"] + SHAPE_GROUPS["fla-defaults"]


def shape_key(shape: dict[str, int]) -> str:
    """Stable string key of a shape: dims in :data:`DIM_ORDER`, e.g. ``"B1-T4096-H16-HV32-K128-V128"``."""
    return "-".join(f"{d}{shape[d]}" for d in DIM_ORDER if d in shape)


SHAPE_KEY_RE = re.compile(r"[A-Za-z]+[0-9]+(?:-[A-Za-z]+[0-9]+)*")
"""A shape key as :func:`shape_key` writes it (``B1-T4096-H16-HV32-K128-V128``)."""


def _is_shape_key(item: str) -> bool:
    """Whether ``item`` is meant as a shape key as :func:`shape_key` writes it (``B1-T4096``;
    ``B1-T96-Q2`` too, refused then for its dimension ``Q``). One part is a key only when it is a
    dimension of :data:`DIM_ORDER` (``T64``): ``qwen4`` is an unknown name, not a dimension ``QWEN``."""
    if not SHAPE_KEY_RE.fullmatch(item) or item.lower() in NAMED_SHAPES:
        return False
    return "-" in item or re.match(r"[A-Za-z]+", item).group(0).upper() in DIM_ORDER


def _parse_free_form(text: str) -> dict[str, int]:
    shape: dict[str, int] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "=" not in part:
            raise ValueError(
                f"--shapes: {part!r} in {text!r} is not NAME=INT; expected e.g. 'B=1,T=4096,H=16,HV=32,K=128,V=128'"
            )
        name, value = (s.strip() for s in part.split("=", 1))
        name = name.upper()
        if name not in DIM_ORDER:
            raise ValueError(f"--shapes: unknown dimension {name!r} in {text!r}; "
                             f"expected one of {', '.join(DIM_ORDER)}")
        if name in shape:
            raise ValueError(f"--shapes: dimension {name!r} given twice in {text!r}")
        if not re.fullmatch(r"[0-9]+", value):
            raise ValueError(f"--shapes: {name}={value!r} in {text!r} is not a positive integer")
        if int(value) < 1:
            raise ValueError(f"--shapes: {name}={value} in {text!r} must be >= 1")
        shape[name] = int(value)
    if "H" in shape and "HV" in shape and shape["HV"] % shape["H"]:
        raise ValueError(f"--shapes: HV={shape['HV']} in {text!r} must be a multiple of H={shape['H']} (GVA groups)")
    if not shape:
        raise ValueError(f"--shapes: empty shape {text!r}")
    return shape


def split_shapes(text: str) -> list[str]:
    """Split ``--shapes`` text into items: ``;`` and ``,`` both separate names and keys (the
    convention of every list option); consecutive ``DIM=N`` parts form one free-form shape, so
    ``qwen3next,B=1,T=64,H=2`` is two items and two free-form shapes need a ``;`` between them."""
    items: list[str] = []
    for part in text.split(";"):
        free: list[str] = []
        for token in (t.strip() for t in part.split(",")):
            if not token:
                continue
            if "=" in token or (free and token.upper() in DIM_ORDER):
                free.append(token)  # a bare dimension after DIM=N parts: the parser says what is missing
                continue
            if free:
                items.append(",".join(free))
                free = []
            items.append(token)
        if free:
            items.append(",".join(free))
    return items


def parse_shapes(spec: str | list[str] | None) -> list[tuple[str, dict[str, int]]]:
    """Parse ``--shapes``.

    Args:
        spec: ``None`` (each op's defaults; returns ``[]``), or names / free-form shapes / shape
            keys (``B1-T4096-H16-HV32-K128-V128``, as the result tables print them) separated
            by ``;`` or ``,`` (see :func:`split_shapes`) or given as a list. A name is a key of
            :data:`NAMED_SHAPES` or a group of :data:`SHAPE_GROUPS` (``anchors``, ``gdn-anchors``,
            ``decode-anchors``, ``conv-anchors``, ``fla-defaults``, ``all``); free form is
            ``B=1,T=4096,H=16,HV=32,K=128,V=128`` (dims from :data:`DIM_ORDER`; ``HV`` defaults to
            ``H``, ``V`` to ``K``, and ``D`` alone means ``K = V = D`` for the gated delta rule ops).

    Returns:
        ``[(label, shape), ...]`` in the given order, duplicates removed; ``label`` is the name
        or the free-form text.

    Raises:
        ValueError: unknown name (the message lists the known ones), malformed ``NAME=INT``,
            unknown dimension, non-positive or non-integer value, duplicated dimension.
    """
    if spec is None:
        return []
    items = spec if isinstance(spec, list) else split_shapes(spec)
    out: list[tuple[str, dict[str, int]]] = []
    seen: set[str] = set()
    for item in items:
        item = item.strip()
        if not item:
            continue
        if "=" in item:
            parsed = [(item, _parse_free_form(item))]
        elif _is_shape_key(item):
            # a shape key as the tables print it (B1-T4096-H16-HV32-K128-V128)
            dims = re.findall(r"([A-Za-z]+)([0-9]+)", item)
            parsed = [(item, _parse_free_form(",".join(f"{d}={v}" for d, v in dims)))]
        elif item.lower() in SHAPE_GROUPS:
            parsed = [(n, dict(NAMED_SHAPES[n])) for n in SHAPE_GROUPS[item.lower()]]
        elif item.lower() in NAMED_SHAPES:
            parsed = [(item.lower(), dict(NAMED_SHAPES[item.lower()]))]
        else:
            raise ValueError(
                f"--shapes: unknown named shape {item!r}; known names: {', '.join(NAMED_SHAPES)}; "
                f"groups: {', '.join(SHAPE_GROUPS)}; or a shape key like B1-T4096-H16-HV32-K128-V128, or free "
                f"form like 'B=1,T=4096,H=16,HV=32,K=128,V=128'"
            )
        for label, shape in parsed:
            k = shape_key(shape)
            if k not in seen:
                seen.add(k)
                out.append((label, shape))
    if not out:
        raise ValueError(f"--shapes: no shape in {spec!r}")
    return out


# CPU (Triton interpreter) caps: every dimension is clamped so the default run finishes in
# seconds on two cores. Ratios H : HV are kept (HV stays a multiple of H).
_CPU_CAPS = dict(B=4, T=96, H=2, K=32, V=32, D=64, W=4)
_CPU_CAPS_QUICK = dict(B=2, T=64, H=1, K=32, V=32, D=32, W=4)


def scale_for_cpu(shape: dict[str, int], quick: bool = False) -> dict[str, int]:
    """Clamp a shape for the Triton interpreter (never enlarges a dimension).

    ``B``, ``T``, ``H``, ``K``, ``V``, ``D`` are capped (``quick`` caps harder; ``T`` 96 keeps a
    partial chunk); ``HV`` becomes ``H_new * min(HV // H, 2)`` so grouped value attention stays
    exercised (``2 * H cap`` when the shape has no ``H``). Returns a new dict.
    """
    caps = _CPU_CAPS_QUICK if quick else _CPU_CAPS
    out = {d: min(n, caps[d]) if d in caps else n for d, n in shape.items()}
    if "H" in shape and "HV" in shape:
        group = max(1, shape["HV"] // shape["H"])
        out["HV"] = out["H"] * min(group, 2)
    elif "HV" in shape:  # ops on value heads only (the output norm)
        out["HV"] = min(shape["HV"], 2 * caps["H"])
    return out


# ----------------------------------------------------------------------------- providers


def fla_available() -> bool:
    """True when flash-linear-attention (``import fla``) imports in this process."""
    try:
        importlib.import_module("fla")
        return True
    except Exception:
        return False


def fla_version() -> str | None:
    """Installed flash-linear-attention version (distribution ``fla-core`` or
    ``flash-linear-attention``), or ``None`` when it does not import."""
    if not fla_available():
        return None
    import importlib.metadata as md

    for dist in ("fla-core", "flash-linear-attention"):
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            pass
    return getattr(importlib.import_module("fla"), "__version__", "unknown")


def _attr(module: str, name: str) -> Callable:
    return getattr(importlib.import_module(module), name)


@dataclass
class OpSpec:
    """One benchmarked op.

    Attributes:
        name: the op name (``--ops`` value and JSON ``op``).
        dims: shape dimensions the op needs; a shape without them does not apply to the op.
        default_shapes: shape names run when ``--shapes`` is not given.
        modes: modes the op supports (``"fwd"``, ``"fwdbwd"``).
        make_inputs: ``(shape, dtype, device, seed) -> dict`` of keyword arguments (tensors);
            the same seed gives the same inputs.
        grad_inputs: names of the inputs that get gradients in ``fwdbwd``.
        reference: float32 gate reference, ``(**inputs) -> dict[name, tensor]``; differentiable.
        providers: ``{provider: (**inputs) -> dict[name, tensor]}``; each is resolved lazily,
            so a provider whose package is missing fails only its own cases.
        available: ``provider -> str | None``: why the provider cannot run this op at all here.
        torch_ref_limit: ``(shape) -> str | None``: why the PyTorch reference is skipped as a
            timed provider at this shape (too slow), or ``None``.
        bytes_moved: ``(shape, dtype, mode) -> int`` counted bytes (model in the docstring of each).
        flops: ``(shape, mode) -> int`` counted floating-point operations.
        tokens: ``(shape) -> int`` tokens per call (``B * T``).
        tolerance: relative-RMSE gate per mode.
        prepare: optional hook ``(provider, mode) -> dict`` run before a provider's cases;
            returns facts to record in ``meta`` (e.g. a guard it had to bypass).
    """

    name: str
    dims: tuple[str, ...]
    default_shapes: tuple[str, ...]
    modes: tuple[str, ...]
    make_inputs: Callable
    grad_inputs: tuple[str, ...]
    reference: Callable
    providers: dict[str, Callable]
    bytes_moved: Callable
    flops: Callable
    tokens: Callable = lambda s: s["B"] * s["T"]
    tolerance: dict[str, float] = field(default_factory=lambda: {"fwd": 0.005, "fwdbwd": 0.01})
    available: Callable = lambda provider: None
    torch_ref_limit: Callable = lambda shape: None
    prepare: Callable | None = None

    def complete_shape(self, shape: dict[str, int]) -> dict[str, int] | str:
        """Fill defaulted dims (``HV = H``, ``V = K``, ``K = V = D``) and drop dims the op does
        not use; return the shape, or the reason it does not apply (a needed dim is missing)."""
        s = dict(shape)
        if "K" in self.dims and "D" in s and "K" not in s:
            s["K"] = s["V"] = s.pop("D")
        if "HV" in self.dims and "H" in s:
            s.setdefault("HV", s["H"])
        if "V" in self.dims and "K" in s:
            s.setdefault("V", s["K"])
        missing = [d for d in self.dims if d not in s]
        if missing:
            return f"shape {shape_key(shape)} lacks {', '.join(missing)} needed by {self.name}"
        return {d: s[d] for d in DIM_ORDER if d in self.dims}  # dims the op does not use are dropped


def _esize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


# ------------------------------------------------------------------- gated delta rule


def _gdn_inputs(shape, dtype, device, seed, decode=False):
    """Inputs of the anchor measurements: q normal, k L2-normalised, v normal,
    ``g = logsigmoid(rand)``, ``beta = sigmoid(rand)``; for decode a random fp32 initial state."""
    B, T, H, HV, K, V = (shape[d] for d in ("B", "T", "H", "HV", "K", "V"))
    gen = torch.Generator(device="cpu").manual_seed(seed)

    def rnd(*size, fn=torch.randn):
        return fn(*size, generator=gen, dtype=torch.float32)

    q = rnd(B, T, H, K)
    k = F.normalize(rnd(B, T, H, K), p=2, dim=-1)
    v = rnd(B, T, HV, V)
    g = F.logsigmoid(rnd(B, T, HV, fn=torch.rand))
    beta = rnd(B, T, HV, fn=torch.rand).sigmoid()
    out = {name: x.to(device=device, dtype=dtype) for name, x in dict(q=q, k=k, v=v, g=g, beta=beta).items()}
    if decode:
        out["initial_state"] = (0.1 * rnd(B, HV, K, V)).to(device)
    return out


def _gdn_ref(**kw):
    from fla_ascend.ops.gated_delta_rule.reference import chunk_gated_delta_rule_ref

    o, ht = chunk_gated_delta_rule_ref(**kw, output_final_state=True)
    return {"o": o, "final_state": ht}


def _gdn_naive(**kw):
    from fla_ascend.ops.gated_delta_rule.reference import naive_recurrent_gated_delta_rule

    o, ht = naive_recurrent_gated_delta_rule(**kw, output_final_state=True)
    return {"o": o, "final_state": ht}


def _gdn_provider(module: str, name: str, hopper_guard: bool = False):
    def run(**kw):
        fn = _attr(module, name)
        o, ht = fn(**kw, output_final_state=True)
        return {"o": o, "final_state": ht}

    run.__name__ = f"{module}.{name}"
    return run


def _fla_hopper_prepare(provider: str, mode: str) -> dict:
    """flash-linear-attention 0.6.0 refuses its gated chunk backward on Hopper with Triton
    3.4 to 3.7.0 (github.com/fla-org/flash-linear-attention/issues/640). With the guard
    bypassed its bf16 gradients matched an fp64 recurrent reference on the H200 (relative RMSE
    0.0024-0.0042, 2026-11-29); the bypass is recorded in meta and the gate still checks the
    gradients."""
    if provider != "fla" or mode != "fwdbwd" or not torch.cuda.is_available():
        return {}
    if torch.cuda.get_device_capability()[0] != 9:
        return {}
    chunk_o = importlib.import_module("fla.ops.common.chunk_o")
    if getattr(chunk_o, "IS_NVIDIA_HOPPER", False):
        chunk_o.IS_NVIDIA_HOPPER = False
        return {"fla_hopper_guard_bypassed":
                "fla.ops.common.chunk_o.IS_NVIDIA_HOPPER = False (flash-linear-attention issue 640)"}
    return {}


def _gdn_bytes(shape, dtype, mode, decode=False):
    """Unavoidable traffic: q, k (``B T H K``), v (``B T HV V``), g, beta (``B T HV``) read, o
    (``B T HV V``) written, the fp32 final state written (and for decode the fp32 initial state
    read). fwdbwd adds: the inputs read again, ``do`` and ``dht`` read, the gradients of q, k,
    v, g, beta written."""
    B, T, H, HV, K, V = (shape[d] for d in ("B", "T", "H", "HV", "K", "V"))
    e = _esize(dtype)
    inputs = (2 * B * T * H * K + B * T * HV * V + 2 * B * T * HV) * e
    out = B * T * HV * V * e
    state = B * HV * K * V * 4
    total = inputs + out + state + (state if decode else 0)
    if mode == "fwdbwd":
        total += inputs + out + state + inputs  # re-read inputs, read do and dht, write grads
    return total


def _gdn_flops(shape, mode, chunk=64):
    """Matmul flops of the chunked algorithm in reference.py, per chunk of ``C`` tokens and
    value head: ``k k^T``, ``q k^T`` (``2 C^2 K`` each), ``T k`` (``2 C^2 K``), ``T v`` and
    ``attn v'`` (``2 C^2 V`` each), ``w h``, ``q h``, ``k^T v'`` (``2 C K V`` each), plus
    ``C^3`` for the triangular solve. fwdbwd counts 3x the forward (the usual convention:
    backward ~ 2x forward)."""
    B, T, HV, K, V = (shape[d] for d in ("B", "T", "HV", "K", "V"))
    C = min(chunk, T)
    per_chunk = 2 * C * C * K * 3 + 2 * C * C * V * 2 + 2 * C * K * V * 3 + C ** 3
    fwd = B * HV * math.ceil(T / C) * per_chunk
    return fwd * (3 if mode == "fwdbwd" else 1)


def _recurrent_flops(shape, mode):
    """Per token and value head: decay ``K V``, ``h^T k`` ``2 K V``, rank-1 update ``2 K V``,
    ``h^T q`` ``2 K V``: ``7 K V``."""
    B, T, HV, K, V = (shape[d] for d in ("B", "T", "HV", "K", "V"))
    return 7 * B * T * HV * K * V


def _torch_ref_limit(max_tokens):
    def limit(shape):
        n = shape["B"] * shape["T"]
        if n > max_tokens:
            return f"PyTorch reference runs token by token: skipped above B*T = {max_tokens} (here {n})"
        return None

    return limit


def _importable(module: str, name: str) -> str | None:
    """``None`` when ``module.name`` imports, else the reason."""
    try:
        getattr(importlib.import_module(module), name)
        return None
    except Exception as e:  # ImportError, AttributeError, a broken kernel module
        return f"{module}.{name} does not import here ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"


def _available(ours: tuple[str, str], theirs: tuple[str, str] | None):
    def available(provider):
        if provider == "fla_ascend":
            return _importable(*ours)
        if provider == "fla":
            if theirs is None:
                return "flash-linear-attention has no such op"
            if not fla_available():
                return "flash-linear-attention does not import here"
            return _importable(*theirs)
        return None

    return available


_gdn_available = _available(("fla_ascend.ops", "chunk_gated_delta_rule"),
                            ("fla.ops.gated_delta_rule", "chunk_gated_delta_rule"))


OPS: dict[str, OpSpec] = {}


def register(spec: OpSpec) -> OpSpec:
    """Add (or replace) an op in :data:`OPS`; returns it."""
    OPS[spec.name] = spec
    return spec


register(OpSpec(
    name="chunk_gated_delta_rule",
    dims=("B", "T", "H", "HV", "K", "V"),
    default_shapes=("qwen3next",),
    modes=("fwd", "fwdbwd"),
    make_inputs=_gdn_inputs,
    grad_inputs=("q", "k", "v", "g", "beta"),
    reference=_gdn_ref,
    providers={
        "fla_ascend": _gdn_provider("fla_ascend.ops", "chunk_gated_delta_rule"),
        "torch_ref": _gdn_naive,
        "fla": _gdn_provider("fla.ops.gated_delta_rule", "chunk_gated_delta_rule"),
    },
    bytes_moved=_gdn_bytes,
    flops=_gdn_flops,
    available=_gdn_available,
    torch_ref_limit=_torch_ref_limit(2048),
    prepare=_fla_hopper_prepare,
))

register(OpSpec(
    name="fused_recurrent_gated_delta_rule",
    dims=("B", "T", "H", "HV", "K", "V"),
    default_shapes=("decode-b64",),
    modes=("fwd",),
    make_inputs=lambda shape, dtype, device, seed: _gdn_inputs(shape, dtype, device, seed, decode=True),
    grad_inputs=(),
    reference=_gdn_ref,
    providers={
        "fla_ascend": _gdn_provider("fla_ascend.ops", "fused_recurrent_gated_delta_rule"),
        "torch_ref": _gdn_naive,
        "fla": _gdn_provider("fla.ops.gated_delta_rule", "fused_recurrent_gated_delta_rule"),
    },
    bytes_moved=lambda shape, dtype, mode: _gdn_bytes(shape, dtype, mode, decode=True),
    flops=_recurrent_flops,
    available=_available(("fla_ascend.ops", "fused_recurrent_gated_delta_rule"),
                         ("fla.ops.gated_delta_rule", "fused_recurrent_gated_delta_rule")),
    torch_ref_limit=_torch_ref_limit(2048),
))


# --------------------------------------------------------------------- causal_conv1d


def _conv_inputs(shape, dtype, device, seed):
    """``x`` ``[B, T, D]`` normal, depthwise ``weight`` ``[D, W]`` and ``bias`` ``[D]`` scaled
    like a default ``nn.Conv1d`` init (uniform in +-1/sqrt(W)); silu activation (the anchors)."""
    B, T, D, W = (shape[d] for d in ("B", "T", "D", "W"))
    gen = torch.Generator(device="cpu").manual_seed(seed)
    bound = W ** -0.5
    x = torch.randn(B, T, D, generator=gen)
    weight = (torch.rand(D, W, generator=gen) * 2 - 1) * bound
    bias = (torch.rand(D, generator=gen) * 2 - 1) * bound
    out = {name: t.to(device=device, dtype=dtype) for name, t in dict(x=x, weight=weight, bias=bias).items()}
    out["activation"] = "silu"
    return out


def _conv_ref(x, weight, bias, activation):
    """Float32 causal depthwise conv written with ``F.conv1d`` (left zero padding of ``W - 1``),
    then silu; independent of the op's own reference."""
    W = weight.shape[-1]
    xt = F.pad(x.float().transpose(1, 2), (W - 1, 0))
    y = F.conv1d(xt, weight.float().unsqueeze(1), bias.float(), groups=x.shape[-1]).transpose(1, 2)
    return {"y": F.silu(y) if activation in ("silu", "swish") else y}


def _conv_provider(module: str, name: str):
    def run(x, weight, bias, activation):
        y, _ = _attr(module, name)(x=x, weight=weight, bias=bias, activation=activation)
        return {"y": y}

    run.__name__ = f"{module}.{name}"
    return run


def _conv_bytes(shape, dtype, mode):
    """x read and y written (``B T D`` each; weight and bias negligible); fwdbwd adds x and dy
    read and dx written."""
    n = shape["B"] * shape["T"] * shape["D"] * _esize(dtype)
    return 2 * n + (3 * n if mode == "fwdbwd" else 0)


def _conv_flops(shape, mode):
    """``2 W`` per output element plus ~4 for bias and silu; fwdbwd 3x."""
    n = shape["B"] * shape["T"] * shape["D"] * (2 * shape["W"] + 4)
    return n * (3 if mode == "fwdbwd" else 1)


register(OpSpec(
    name="causal_conv1d",
    dims=("B", "T", "D", "W"),
    default_shapes=("conv-b4-t4096",),
    modes=("fwd", "fwdbwd"),
    make_inputs=_conv_inputs,
    grad_inputs=("x", "weight", "bias"),
    reference=_conv_ref,
    providers={
        "fla_ascend": _conv_provider("fla_ascend.ops.causal_conv1d", "causal_conv1d"),
        "torch_ref": _conv_ref,
        "fla": _conv_provider("fla.modules.causal_conv1d", "causal_conv1d"),
    },
    bytes_moved=_conv_bytes,
    flops=_conv_flops,
    available=_available(("fla_ascend.ops.causal_conv1d", "causal_conv1d"),
                         ("fla.modules.causal_conv1d", "causal_conv1d")),
))


# ---------------------------------------------------------------------------- l2norm


def _l2_inputs(shape, dtype, device, seed):
    """``x`` ``[B, T, H, K]`` normal (the q / k L2 norm of GatedDeltaNet)."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(*(shape[d] for d in ("B", "T", "H", "K")), generator=gen)
    return {"x": x.to(device=device, dtype=dtype)}


def _l2_ref(x):
    """Float32 ``x / sqrt(sum(x^2) + 1e-6)`` over the last dim (flash-linear-attention's eps)."""
    xf = x.float()
    return {"y": xf * torch.rsqrt(xf.pow(2).sum(-1, keepdim=True) + 1e-6)}


def _l2_provider(module: str, name: str):
    def run(x):
        return {"y": _attr(module, name)(x)}

    return run


def _rowwise_bytes(n_tensors_fwd, n_tensors_bwd, dims):
    def count(shape, dtype, mode):
        n = math.prod(shape[d] for d in dims) * _esize(dtype)
        return n * (n_tensors_fwd + (n_tensors_bwd if mode == "fwdbwd" else 0))

    return count


register(OpSpec(
    name="l2norm",
    dims=("B", "T", "H", "K"),
    default_shapes=("qwen3next",),
    modes=("fwd", "fwdbwd"),
    make_inputs=_l2_inputs,
    grad_inputs=("x",),
    reference=_l2_ref,
    providers={
        "fla_ascend": _l2_provider("fla_ascend.ops.norm", "l2norm"),
        "torch_ref": _l2_ref,
        "fla": _l2_provider("fla.modules.norm.l2norm", "l2norm"),
    },
    bytes_moved=_rowwise_bytes(2, 3, ("B", "T", "H", "K")),  # x in, y out; bwd: x, dy in, dx out
    flops=lambda shape, mode: 4 * math.prod(shape[d] for d in ("B", "T", "H", "K")) * (3 if mode == "fwdbwd" else 1),
    available=_available(("fla_ascend.ops.norm", "l2norm"), ("fla.modules.norm.l2norm", "l2norm")),
))


# -------------------------------------------------------------------- rms_norm_gated


def _rmsg_inputs(shape, dtype, device, seed):
    """GatedDeltaNet's output norm: ``o`` and gate ``z`` ``[B, T, HV, V]``, ``weight`` ``[V]``."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    size = tuple(shape[d] for d in ("B", "T", "HV", "V"))
    x, z = torch.randn(*size, generator=gen), torch.randn(*size, generator=gen)
    w = 1 + 0.1 * torch.randn(shape["V"], generator=gen)
    return {name: t.to(device=device, dtype=dtype) for name, t in dict(x=x, g=z, weight=w).items()}


def _rmsg_ref(x, g, weight):
    """Float32 ``x * rsqrt(mean(x^2) + 1e-6) * weight * silu(g)`` over the last dim."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()
    return {"y": y * F.silu(g.float())}


def _rmsg_provider(module: str, name: str):
    def run(x, g, weight):
        return {"y": _attr(module, name)(x, g, weight, None, activation="swish", eps=1e-6)}

    return run


register(OpSpec(
    name="rms_norm_gated",
    dims=("B", "T", "HV", "V"),
    default_shapes=("qwen3next",),
    modes=("fwd", "fwdbwd"),
    make_inputs=_rmsg_inputs,
    grad_inputs=("x", "g", "weight"),
    reference=_rmsg_ref,
    providers={
        "fla_ascend": _rmsg_provider("fla_ascend.ops.norm", "rms_norm_gated"),
        "torch_ref": _rmsg_ref,
        "fla": _rmsg_provider("fla.modules.norm.fused_norm_gate", "rms_norm_gated"),
    },
    bytes_moved=_rowwise_bytes(3, 5, ("B", "T", "HV", "V")),  # x, g in, y out; bwd: x, g, dy in, dx, dg out
    flops=lambda shape, mode: 10 * math.prod(shape[d] for d in ("B", "T", "HV", "V")) * (3 if mode == "fwdbwd" else 1),
    available=_available(("fla_ascend.ops.norm", "rms_norm_gated"),
                         ("fla.modules.norm.fused_norm_gate", "rms_norm_gated")),
))

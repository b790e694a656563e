"""Which CUDA launch of each chunk_kda stage is fastest while staying accurate and deterministic in bf16?

A coordinate search over the KDA entries of ``fla_ascend.ops.common.tiles.CUDA_LAUNCH`` (the
launch options, the widest tile block, the intra backward's K split, the NPU forms), all in one run:

1. For each stage of ``--stages`` in turn and each of its knobs (``KNOBS``), every value is set as an
   override of the active target (``fla_ascend.bench.tuning.stage_variant``; the stages found so far
   kept), with no fallback to another launch (``strict_stage``).
2. A variant is timed by its own kernel's CUDA time (``torch.profiler``, mean of 5 forward + backward
   steps after 3 warm-up steps) at Kimi Linear's layer, B1 T4096 H32 K = V = 128, bf16.
3. It is checked against the float64 chunked reference on two bf16 cases at K = V = 128 (T300 B2
   H2 HV4 with an initial state; T256 H2 with the gate in the kernel): output, final state and the
   gradient of every input within the GPU tier's limits (tests/ops/test_kda_chunk.py), and for
   bit-identical results of two forward + backward steps at the timing shape.
4. The value kept is the fastest "ok" one, when it is at least 2% faster than the current one.
   After ``--budget-s`` seconds the later stages keep their shipped entries.
5. The chosen entries together are checked again at K = V = 256, 100 and 64 (chunk 32) and K = 60,
   V = 100 (chunk 16).

At the end the whole op with every stage's choice is timed against flash-linear-attention's
``chunk_kda`` (when importable) in the same process at T4096 and T32768, forward and forward +
backward (``triton.testing.do_bench`` median). Results: ``$OUT/kda_tune.json`` and
``$OUT/kda_tune.md``; the chosen entries are to be copied into ``CUDA_LAUNCH`` by hand and checked with
the GPU tier.

    python3 benchmarks/tune_kda_stages.py [--stages kda_intra_bwd,bwd_dh_gk]   # on a CUDA GPU
    DRY=1 python3 benchmarks/tune_kda_stages.py --stages kda_fwd_o               # CPU smoke run
"""
import argparse
import collections
import contextlib
import json
import os
import sys
import time

sys.path.insert(0, os.getcwd())
import fla_ascend.backend  # noqa: E402, F401  (before triton: it decides interpreter mode)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from fla_ascend.bench.tuning import stage_variant, strict_stage  # noqa: E402
from fla_ascend.cli_common import require_cuda_gpu, split_list  # noqa: E402
from fla_ascend.ops.common import tiles  # noqa: E402
from fla_ascend.ops.kda import chunk_kda  # noqa: E402
from fla_ascend.ops.kda.reference import chunk_kda_ref  # noqa: E402
from fla_ascend.ops.utils import rel_rmse  # noqa: E402

OUT = os.environ.get("OUT", "/tmp")
DRY = bool(os.environ.get("DRY"))
DEVICE = "cpu" if DRY else "cuda"
DTYPE = torch.float32 if DRY else torch.bfloat16

KERNELS = {
    "kda_intra_fwd": "kda_intra_fwd_kernel", "kda_wy_fwd": "kda_wy_fwd_kernel", "kda_wy_bwd": "kda_wy_bwd_kernel",
    "kda_fwd_o": "kda_fwd_o_kernel", "kda_bwd_dav": "kda_bwd_dav_kernel", "kda_intra_bwd": "kda_intra_bwd_kernel",
    "fwd_h_gk": "chunk_fwd_h_kernel", "bwd_dh_gk": "chunk_bwd_dh_kernel",
}
"""Stage -> the kernel its variants are timed by."""
_WARPS_STAGES = {"num_warps": (2, 4, 8), "num_stages": (1, 2, 3, 4)}
KNOBS = {
    "kda_intra_bwd": {**_WARPS_STAGES, "block": (32, 64), "k_split": (1, 2, 4), "diag_block": (False, True),
                      "split_sides": (False, True), "diag_dot_range": (0.0, 32.0)},
    "kda_wy_bwd": {**_WARPS_STAGES, "split_u": (False, True), "block": (32, 64), "v_block": (32, 64, 128)},
    "bwd_dh_gk": {"bv": ((64, 32), (32,), (16,)), "num_stages": (1, 2, 3, 4), "num_warps": (4, 8)},
    "fwd_h_gk": {"bv": ((64, 32), (32,), (16,)), "num_stages": (1, 2, 3, 4), "num_warps": (4, 8)},
    "kda_intra_fwd": {**_WARPS_STAGES, "block": (32, 64), "diag_block": (False, True), "diag_dot_range": (0.0, 32.0)},
    "kda_wy_fwd": {**_WARPS_STAGES, "block": (32, 64), "reload_ai": (False, True)},
    "kda_fwd_o": {**_WARPS_STAGES, "block": (32, 64, 128), "one_acc": (False, True)},
    "kda_bwd_dav": {**_WARPS_STAGES, "block": (32, 64, 128)},
}
"""Stage -> knob -> values tried (a knob missing from the entry means Triton's default)."""
LIMIT, GATE_LIMIT, A_LOG_LIMIT = 8e-3, 2e-2, 4e-2
"""The GPU tier's bf16 limits (tests/ops/test_kda_chunk.py): o, state, dq, dk, dv, dh0; dg, dbeta,
ddt_bias; dA_log."""
GATE_GRADS = ("g", "beta", "dt_bias")


def kda_inputs(B, T, H, HV, K, V, seed=0, gate=False, h0=False, dtype=DTYPE):
    """chunk_kda's keyword arguments (leaves requiring grad) on ``DEVICE``."""
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen)

    x = dict(q=randn(B, T, H, K), k=F.normalize(randn(B, T, H, K), dim=-1), v=randn(B, T, HV, V),
             beta=torch.sigmoid(randn(B, T, HV)))
    x = {n: t.to(dtype) for n, t in x.items()}
    if gate:
        x.update(g=randn(B, T, HV, K), A_log=torch.empty(HV).uniform_(-1.0, 1.0, generator=gen),
                 dt_bias=0.5 * randn(HV * K))
    else:
        x["g"] = F.logsigmoid(randn(B, T, HV, K) + 3.0)
    if h0:
        x["initial_state"] = randn(B, HV, K, V)
    x = {n: t.to(DEVICE).requires_grad_() for n, t in x.items()}
    if gate:
        x["use_gate_in_kernel"] = True
    return x


def _leaves(x):
    return [t for t in x.values() if isinstance(t, torch.Tensor) and t.requires_grad]


def step(fn, x, do, dht=None):
    """One forward + backward of ``fn`` (chunk_kda's signature): ``(o, ht, grads)``."""
    o, ht = fn(**x, output_final_state=dht is not None)
    loss = (o * do).sum() + ((ht * dht).sum() if dht is not None else 0)
    return o, ht, torch.autograd.grad(loss, _leaves(x))


SEARCH_CASES = [dict(B=2, T=300, H=2, HV=4, K=128, V=128, h0=True),
                dict(B=1, T=256, H=2, HV=2, K=128, V=128, gate=True)]
"""Accuracy cases of every variant (the timing shape's head dims: no extra compiles)."""
FINAL_CASES = [dict(B=1, T=256, H=1, HV=1, K=256, V=256, h0=True),
               dict(B=1, T=150, H=1, HV=2, K=100, V=100, h0=True),
               dict(B=2, T=200, H=1, HV=2, K=64, V=64, chunk_size=32),
               dict(B=1, T=70, H=1, HV=2, K=60, V=100, chunk_size=16)]
"""Further cases for the chosen entries (other head dims and chunk sizes)."""


def errors(cases=None):
    """Worst rel-RMSE / limit over the accuracy cases (``<= 1``: within the limits), by tensor."""
    worst = {}
    cases = cases or SEARCH_CASES
    if DRY:
        cases = [dict(B=1, T=40, H=1, HV=1, K=32, V=32, h0=True)]
    for case in cases:
        case = dict(case)
        chunk_size = case.pop("chunk_size", 64)
        x = kda_inputs(**case)
        x["chunk_size"] = chunk_size
        gen = torch.Generator().manual_seed(7)
        B, T, HV, V = x["v"].shape
        do = torch.randn(B, T, HV, V, generator=gen).to(DEVICE, DTYPE)
        dht = torch.randn(B, HV, x["k"].shape[-1], V, generator=gen).to(DEVICE)
        o, ht, grads = step(chunk_kda, x, do, dht)
        xr = {n: t.detach().double().requires_grad_() if isinstance(t, torch.Tensor) and t.is_floating_point()
              else t for n, t in x.items()}
        o_ref, ht_ref, grads_ref = step(chunk_kda_ref, xr, do.double(), dht.double())
        names = [n for n, t in x.items() if isinstance(t, torch.Tensor) and t.requires_grad]
        pairs = [("o", o_ref, o), ("ht", ht_ref, ht)] + [(f"d{n}", r, g) for n, r, g in zip(names, grads_ref, grads)]
        for name, ref, out in pairs:
            limit = A_LOG_LIMIT if name == "dA_log" else GATE_LIMIT if name[1:] in GATE_GRADS else LIMIT
            worst[name] = max(worst.get(name, 0.0), rel_rmse(ref, out.double()) / limit)
    return worst


def timing_inputs():
    B, T, H, K = (1, 128, 1, 32) if DRY else (1, 4096, 32, 128)
    x = kda_inputs(B=B, T=T, H=H, HV=H, K=K, V=K)
    return x, torch.randn_like(x["v"])


def kernel_times(x, do, steps=5):
    """Mean CUDA time (us) per forward + backward step of each kernel."""
    for _ in range(3):
        step(chunk_kda, x, do)
    if DRY:
        return {}
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step(chunk_kda, x, do)
        torch.cuda.synchronize()
    agg = collections.defaultdict(float)
    for e in prof.key_averages():
        agg[e.key] += e.self_device_time_total / steps
    return dict(agg)


def deterministic(x, do):
    a = step(chunk_kda, x, do)
    b = step(chunk_kda, x, do)
    return all(torch.equal(p, q) for p, q in zip([a[0], *a[2]], [b[0], *b[2]]))


def _plain(entry):
    return {k: dict(v) if hasattr(v, "items") else v for k, v in entry.items()}


def measure(stage, entry, chosen, x, do):
    """One variant: its kernel's time, accuracy and determinism (``ok``), or the error it raised."""
    with contextlib.ExitStack() as stack:
        for s, e in {**chosen, stage: entry}.items():
            stack.enter_context(stage_variant(s, e))
        stack.enter_context(strict_stage(stage))
        try:
            t = kernel_times(x, do).get(KERNELS[stage], 0.0)
            err = errors()
            det = deterministic(x, do)
        except Exception as e:  # noqa: BLE001  (a launch that does not fit or compile is a result)
            return dict(entry=_plain(entry), error=f"{type(e).__name__}: {str(e)[:200]}", ok=False)
    worst = max(err.values())
    return dict(entry=_plain(entry), us=t, worst_error_over_limit=worst, deterministic=det,
                ok=worst <= 1.0 and det, errors=err)


def op_times(chosen, lengths=(4096, 32768)):
    """Whole-op times (ms) of fla-ascend with ``chosen`` and of flash-linear-attention."""
    from triton.testing import do_bench
    try:
        from fla.ops.kda import chunk_kda as fla_chunk_kda
    except ImportError:
        fla_chunk_kda = None
    rows = []
    for T in ((128,) if DRY else lengths):
        x = kda_inputs(B=1, T=T, H=1 if DRY else 32, HV=1 if DRY else 32, K=32 if DRY else 128,
                       V=32 if DRY else 128)
        do = torch.randn_like(x["v"])
        for provider, fn in (("fla_ascend", chunk_kda), ("fla", fla_chunk_kda)):
            if fn is None:
                continue
            with contextlib.ExitStack() as stack:
                if provider == "fla_ascend":
                    for s, e in chosen.items():
                        stack.enter_context(stage_variant(s, e))
                for mode in ("fwd", "fwdbwd"):
                    def f():
                        with torch.no_grad() if mode == "fwd" else contextlib.nullcontext():
                            if mode == "fwd":
                                return fn(**x)
                            return step(fn, x, do)
                    f()
                    ms = 0.0 if DRY else do_bench(f, warmup=25, rep=100, return_mode="median")
                    rows.append(dict(T=T, provider=provider, mode=mode, ms=ms))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stages", default=",".join(KNOBS), help=f"comma-separated, in order (default: {','.join(KNOBS)})")
    ap.add_argument("--op-lengths", default="4096,32768", help="T of the whole-op timings (B1 H32 K = V = 128)")
    ap.add_argument("--budget-s", type=float, default=330.0,
                    help="stop searching (later stages keep their shipped entry) after this many seconds")
    args = ap.parse_args()
    if not DRY:
        require_cuda_gpu("benchmarks/tune_kda_stages.py (DRY=1 runs its CPU smoke test)")
    stages = split_list(args.stages)
    unknown = [s for s in stages if s not in KNOBS]
    if unknown:
        sys.exit(f"--stages: unknown {unknown}; known: {list(KNOBS)}")
    x, do = timing_inputs()
    chosen, log = {}, []
    t0 = time.time()
    for stage in stages:
        if time.time() - t0 > args.budget_s:
            print(f"search budget spent: {stage} and later keep their shipped entries", flush=True)
            break
        current = _plain(tiles.CUDA_LAUNCH[stage])
        knobs = KNOBS[stage] if not DRY else dict(list(KNOBS[stage].items())[:1])
        best = measure(stage, current, chosen, x, do)
        best["knob"] = "shipped"
        log.append(dict(stage=stage, **best))
        print(f"{stage} shipped {best.get('us', 0):8.1f} us ok={best['ok']} {best.get('error', '')}", flush=True)
        for knob, values in knobs.items():
            for value in values:
                if current.get(knob) == value:
                    continue
                r = measure(stage, {**current, knob: value}, chosen, x, do)
                r["knob"] = f"{knob}={value}"
                log.append(dict(stage=stage, **r))
                print(f"{stage} {r['knob']:>22} {r.get('us', 0):8.1f} us ok={r['ok']} "
                      f"err/lim={r.get('worst_error_over_limit', float('nan')):.2f} {r.get('error', '')}", flush=True)
                if r["ok"] and (not best["ok"] or r["us"] < 0.98 * best["us"]):
                    best = r
            current = best["entry"]
        chosen[stage] = current
        print(f"{stage} chosen {current} {best.get('us', 0):.1f} us ({time.time() - t0:.0f} s)", flush=True)
        json.dump(dict(chosen=chosen, log=log), open(f"{OUT}/kda_tune.json", "w"), indent=1, default=str)
    with contextlib.ExitStack() as stack:
        for s, e in chosen.items():
            stack.enter_context(stage_variant(s, e))
        final = errors(FINAL_CASES)
    print(f"chosen entries on the further cases: worst error / limit {max(final.values()):.2f} {final}", flush=True)
    ops = op_times(chosen, [int(t) for t in split_list(args.op_lengths)])
    result = dict(chosen=chosen, log=log, final_errors=final, op_times=ops)
    json.dump(result, open(f"{OUT}/kda_tune.json", "w"), indent=1, default=str)
    lines = ["| stage | chosen entry | shipped us | chosen us |", "|---|---|---|---|"]
    for stage in chosen:
        rows = [r for r in log if r["stage"] == stage]
        shipped = rows[0].get("us", float("nan"))
        best = min((r["us"] for r in rows if r["ok"] and r["entry"] == chosen[stage]), default=float("nan"))
        lines.append(f"| {stage} | `{chosen[stage]}` | {shipped:.1f} | {best:.1f} |")
    lines += ["", "| T | mode | fla-ascend ms | fla ms | fla / ours |", "|---|---|---|---|---|"]
    for T in sorted({r["T"] for r in ops}):
        for mode in ("fwd", "fwdbwd"):
            t = {r["provider"]: r["ms"] for r in ops if r["T"] == T and r["mode"] == mode}
            ratio = t["fla"] / t["fla_ascend"] if "fla" in t and t["fla_ascend"] else float("nan")
            lines.append(f"| {T} | {mode} | {t['fla_ascend']:.3f} | {t.get('fla', float('nan')):.3f} | {ratio:.2f} |")
    open(f"{OUT}/kda_tune.md", "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

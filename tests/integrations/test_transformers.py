"""transformers' Qwen3-Next, Qwen3.5 and Kimi Linear (tiny random configs: 2 layers, hidden 128, one
linear-attention layer) with :func:`fla_ascend.integrations.transformers.enable` against
transformers' own PyTorch path: prefill, a padded batch, 4 cached decode steps, a training step's
gradients, decode with grad mode on (Kimi Linear's prefill and training need ``chunk_kda``). float32
on the CPU (the interpreter)."""
from __future__ import annotations

import copy

import pytest
import torch

from fla_ascend.ops.utils import rel_rmse

transformers = pytest.importorskip("transformers")
ft = pytest.importorskip("fla_ascend.integrations.transformers")

TOL = 1e-5
VOCAB, B, T = 64, 2, 20


def _qwen3_next():
    cfg = transformers.Qwen3NextConfig(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4,
        linear_key_head_dim=16, linear_value_head_dim=16, layer_types=["linear_attention", "full_attention"],
        num_experts=2, num_experts_per_tok=1, moe_intermediate_size=32, shared_expert_intermediate_size=32,
    )
    return transformers.Qwen3NextForCausalLM(cfg)


def _qwen3_5():
    cfg = transformers.Qwen3_5TextConfig(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4,
        linear_key_head_dim=16, linear_value_head_dim=16, layer_types=["linear_attention", "full_attention"],
    )
    return transformers.Qwen3_5ForCausalLM(cfg)


MODELS = {"qwen3_next": _qwen3_next, "qwen3_5": _qwen3_5}
SLOW = pytest.mark.slow  # 5-20 s each under the interpreter: CI runs every case with Qwen3-Next, Qwen3.5's prefill


def _params(*fast):
    return [pytest.param(n, marks=() if n in fast else SLOW) for n in sorted(MODELS)]


@pytest.fixture(scope="module")
def model(request):
    torch.manual_seed(0)
    assert request.param in MODELS
    m = MODELS[request.param]().float()
    # a decay that matters over T tokens (the random init's A_log can make g almost -inf)
    for layer in m.model.layers:
        if hasattr(layer, "linear_attn"):
            with torch.no_grad():
                layer.linear_attn.A_log.uniform_(-2, 0)
    return request.param, m.eval()


def _logits(m, **kw):
    return m(**kw).logits


def test_find_models_lists_qwen_and_kimi():
    found = {name.split(".")[2]: kernels for name, kernels in ft.find_models().items()}
    conv = {"causal_conv1d_fn", "causal_conv1d_update"}
    for model_type in ("qwen3_next", "qwen3_5"):
        assert set(found[model_type]) == {"chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule"} | conv
    assert found["kimi_linear"] == {"chunk_kda": "chunk_kimi_delta_attention",
                                    "fused_recurrent_kda": "recurrent_kimi_delta_attention",
                                    "causal_conv1d_fn": "causal_conv1d_fn",
                                    "causal_conv1d_update": "causal_conv1d_update"}


@pytest.mark.parametrize("model", _params("qwen3_next", "qwen3_5"), indirect=True)
def test_enable_disable_restores(model):
    name, _ = model
    module = __import__(f"transformers.models.{name}.modeling_{name}", fromlist=["x"])
    before = module.torch_chunk_gated_delta_rule
    with ft.enable([name]):
        assert module.torch_chunk_gated_delta_rule is ft.ADAPTERS["chunk_gated_delta_rule"]
        assert ft.enabled_models() == [name]
    assert module.torch_chunk_gated_delta_rule is before and ft.enabled_models() == []
    ft.enable([name])
    ft.disable()
    assert module.torch_chunk_gated_delta_rule is before
    with pytest.raises(ValueError, match="no transformers model 'llama'"):
        ft.enable(["llama"])


def test_enable_nests_and_takes_one_name():
    """Nested ``with enable(...)`` blocks: the inner exit keeps what the outer block enabled; a
    single string is one model name (it iterated letters)."""
    qn = __import__("transformers.models.qwen3_next.modeling_qwen3_next", fromlist=["x"])
    q5 = __import__("transformers.models.qwen3_5.modeling_qwen3_5", fromlist=["x"])
    before_qn, before_q5 = qn.torch_chunk_gated_delta_rule, q5.torch_chunk_gated_delta_rule
    adapter = ft.ADAPTERS["chunk_gated_delta_rule"]
    with ft.enable("qwen3_next"):
        assert ft.enabled_models() == ["qwen3_next"]
        with ft.enable(["qwen3_next", "qwen3_5"]):
            assert ft.enabled_models() == ["qwen3_5", "qwen3_next"]
        assert qn.torch_chunk_gated_delta_rule is adapter
        assert q5.torch_chunk_gated_delta_rule is before_q5
        assert ft.enabled_models() == ["qwen3_next"]
    assert qn.torch_chunk_gated_delta_rule is before_qn and ft.enabled_models() == []
    # disable() restores everything; handles still open then close without effect
    outer = ft.enable("qwen3_next")
    ft.disable()
    with ft.enable("qwen3_next"):
        outer.__exit__(None, None, None)
        assert qn.torch_chunk_gated_delta_rule is adapter
    assert qn.torch_chunk_gated_delta_rule is before_qn


@pytest.mark.parametrize("model", _params("qwen3_next", "qwen3_5"), indirect=True)
def test_prefill_and_padded_batch(model):
    name, m = model
    ids = torch.randint(0, VOCAB, (B, T))
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, :5] = 0  # left padding of the second sequence
    with torch.no_grad():
        ref, ref_pad = _logits(m, input_ids=ids), _logits(m, input_ids=ids, attention_mask=mask)
        with ft.enable([name]):
            out, out_pad = _logits(m, input_ids=ids), _logits(m, input_ids=ids, attention_mask=mask)
    assert rel_rmse(ref, out) < TOL
    assert rel_rmse(ref_pad[1, 5:], out_pad[1, 5:]) < TOL and rel_rmse(ref_pad[0], out_pad[0]) < TOL


@pytest.mark.parametrize("model", _params("qwen3_next"), indirect=True)
def test_cached_decode(model):
    """Prefill with a cache, then 4 decode steps (the conv update and fused recurrent kernels)."""
    name, m = model

    def run():
        ids = torch.randint(0, VOCAB, (B, 12), generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            out = m(input_ids=ids, use_cache=True)
            cache, logits = out.cache, [out.logits[:, -1]]
            for _ in range(4):
                nxt = logits[-1].argmax(-1, keepdim=True)
                out = m(input_ids=nxt, cache=cache, use_cache=True)
                cache = out.cache
                logits.append(out.logits[:, -1])
        return torch.stack(logits)

    ref = run()
    with ft.enable([name]):
        out = run()
    assert rel_rmse(ref, out) < TOL


@pytest.mark.parametrize("model", _params("qwen3_next"), indirect=True)
def test_training_step_gradients(model):
    name, m = model
    ids = torch.randint(0, VOCAB, (B, T))

    def grads():
        m.zero_grad()
        m.train()
        loss = m(input_ids=ids, labels=ids).loss
        loss.backward()
        m.eval()
        return loss.detach(), {n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None}

    ref_loss, ref = grads()
    with ft.enable([name]):
        loss, out = grads()
    assert rel_rmse(ref_loss, loss) < TOL
    assert ref.keys() == out.keys()
    for n in ref:  # some gradients are ~1e-10 (an expert no token picked): an absolute floor for those
        assert (ref[n] - out[n]).norm() <= 1e-4 * ref[n].norm() + 1e-7, n


@pytest.mark.parametrize("model", _params("qwen3_next"), indirect=True)
def test_decode_with_grad_mode_on(model):
    """A cached decode step in grad mode (e.g. inside a training loop) runs, as with
    flash-linear-attention; the same logits as under no_grad."""
    name, m = model
    ids = torch.randint(0, VOCAB, (B, 8))
    with ft.enable([name]):
        with torch.no_grad():
            cache = m(input_ids=ids, use_cache=True).cache
        nxt = ids[:, -1:]
        cache2 = copy.deepcopy(cache)
        out = m(input_ids=nxt, cache=cache, use_cache=True).logits
        assert out.requires_grad
        with torch.no_grad():
            ref = m(input_ids=nxt, cache=cache2, use_cache=True).logits
    assert rel_rmse(ref, out.detach()) < TOL


def test_conv_adapter_no_copy_and_states():
    """causal_conv1d_fn reads a transposed [B, T, D] input without a copy and returns a view;
    initial/final states in causal-conv1d's [B, D, W - 1] layout; the update adapter shifts the
    state in place."""
    from fla_ascend.ops.causal_conv1d.reference import causal_conv1d_ref

    D, W = 24, 4
    x_btd = torch.randn(B, 9, D)
    w, bias = torch.randn(D, W), torch.randn(D)
    h0 = torch.randn(B, D, W - 1)
    y, final = ft.conv1d_fn(x_btd.transpose(1, 2), w, bias, initial_states=h0, return_final_states=True,
                            activation="silu")
    ref, ref_ht = causal_conv1d_ref(x_btd, w, bias, None, torch.cat([torch.zeros(B, D, 1), h0], -1), True, "silu")
    assert y.shape == (B, D, 9) and y.transpose(1, 2).is_contiguous()
    assert rel_rmse(ref.transpose(1, 2), y) < TOL and rel_rmse(ref_ht[..., 1:], final) < TOL
    state = torch.randn(B, D, W)
    expect_state = torch.cat([state[..., 1:], x_btd[:, :1].transpose(1, 2)], -1)
    step = ft.conv1d_update(x_btd[:, :1].transpose(1, 2), state, w, bias, "silu")
    assert step.shape == (B, D, 1) and torch.equal(state, expect_state)
    with pytest.raises(NotImplementedError, match="seq_idx"):
        ft.conv1d_fn(x_btd.transpose(1, 2), w, seq_idx=torch.zeros(B, 9, dtype=torch.int32))


@pytest.mark.parametrize("name", ["qwen3_next", "qwen3_5"])
def test_layer_loads_transformers_state_dict(name):
    """fla_ascend.layers.GatedDeltaNet loads Qwen3-Next's and Qwen3.5's GatedDeltaNet state dicts
    (Qwen3.5's in_proj_qkv / in_proj_z / in_proj_b / in_proj_a regrouped) and computes what
    transformers' layer computes."""
    from fla_ascend.layers import GatedDeltaNet

    torch.manual_seed(0)
    cfg = MODELS[name]().config
    hf = (transformers.models.qwen3_next.modeling_qwen3_next.Qwen3NextGatedDeltaNet if name == "qwen3_next" else
          transformers.models.qwen3_5.modeling_qwen3_5.Qwen3_5GatedDeltaNet)(cfg, 0).float().eval()
    with torch.no_grad():
        hf.A_log.uniform_(-2, 0)
    ours = GatedDeltaNet(cfg.hidden_size, cfg.linear_num_key_heads, cfg.linear_num_value_heads,
                         cfg.linear_key_head_dim, cfg.linear_value_head_dim, cfg.linear_conv_kernel_dim,
                         cfg.rms_norm_eps)
    ours.load_state_dict(hf.state_dict(), strict=True)
    x = torch.randn(B, 11, cfg.hidden_size)
    with torch.no_grad():
        ref = hf(x)
        out, _ = ours(x)
    assert rel_rmse(ref, out) < TOL


@pytest.mark.gpu
def test_qwen3_next_layer_real_size_gpu(tmp_path):
    """GPU tier: Qwen3-Next's layer at its real size (hidden 2048, 16/32 heads of 128, T = 4096,
    bf16) through transformers with enable(): output and gradients within 3x (+ 2e-3) of the distance
    of transformers' own bf16 PyTorch path from the fp32 PyTorch path (on the CPU at T = 40 in
    fp16 the largest parameter-gradient ratio was 2.3x; times in the script's table)."""
    import importlib.util
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "qwen3_next_layer.py"
    spec = importlib.util.spec_from_file_location("qwen3_next_layer", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--out", str(tmp_path), "--quick"]) == 0
    rows = {r["path"]: r for r in json.loads((tmp_path / "qwen3_next_layer.json").read_text())["rows"]}
    ours, torch_bf16 = rows["fla_ascend"], rows["torch"]
    for key in ("out_rel_rmse", "dx_rel_rmse", "max_param_grad_rel_rmse"):
        assert ours[key] <= 3 * torch_bf16[key] + 2e-3, (key, ours[key], torch_bf16[key])


# --- Kimi Linear (KDA) --------------------------------------------------------------------------

def _kimi_linear():
    cfg = transformers.KimiLinearConfig(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=64, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, kv_lora_rank=16, q_lora_rank=None, qk_rope_head_dim=16,
        v_head_dim=32, qk_nope_head_dim=16, num_experts_per_tok=1, num_local_experts=2, linear_head_dim=32,
        linear_num_heads=4, layer_types=["linear_attention", "full_attention"], pad_token_id=0, bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    m = transformers.KimiLinearForCausalLM(cfg).float()
    with torch.no_grad():  # a decay that matters over the test's tokens
        m.model.layers[0].self_attn.forget_gate.A_log.uniform_(-2, 0)
        m.model.layers[0].self_attn.forget_gate.dt_bias.normal_(0, 0.5)
    return m.eval()


KIMI = "kimi_linear"
_KIMI_MODULE = "transformers.models.kimi_linear.modeling_kimi_linear"


def _has_chunk_kda() -> bool:
    return "chunk_kda" not in ft.unavailable()


needs_chunk_kda = pytest.mark.skipif(not _has_chunk_kda(), reason="fla_ascend.ops.kda.chunk_kda is not in this build")


def test_kimi_linear_enable_routes_kda():
    module = __import__(_KIMI_MODULE, fromlist=["x"])
    before_rec, before_chunk = module.recurrent_kimi_delta_attention, module.chunk_kimi_delta_attention
    with ft.enable(KIMI):
        assert module.recurrent_kimi_delta_attention is ft.ADAPTERS["fused_recurrent_kda"]
        assert module.causal_conv1d_update is ft.ADAPTERS["causal_conv1d_update"]
        expect = ft.ADAPTERS["chunk_kda"] if _has_chunk_kda() else before_chunk
        assert module.chunk_kimi_delta_attention is expect
        assert ft.enabled_models() == [KIMI]
    assert module.recurrent_kimi_delta_attention is before_rec and module.chunk_kimi_delta_attention is before_chunk


def _kimi_decode(m, steps=4):
    ids = torch.randint(0, VOCAB, (B, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out = m(input_ids=ids, use_cache=True)
        cache, logits = out.cache, [out.logits[:, -1]]
        for _ in range(steps):
            nxt = logits[-1].argmax(-1, keepdim=True)
            out = m(input_ids=nxt, cache=cache, use_cache=True)
            cache = out.cache
            logits.append(out.logits[:, -1])
    return torch.stack(logits), cache


def test_kimi_linear_cached_decode():
    """Prefill with a cache (transformers' chunk function unless chunk_kda exists), then 4 decode
    steps through fused_recurrent_kda and the conv update kernel; logits and the recurrent state."""
    m = _kimi_linear()
    ref, ref_cache = _kimi_decode(m)
    with ft.enable(KIMI):
        out, cache = _kimi_decode(m)
    assert rel_rmse(ref, out) < TOL
    ref_state, state = ref_cache.get_recurrent_state(0, state_idx=0), cache.get_recurrent_state(0, state_idx=0)
    assert state.dtype == torch.float32 and rel_rmse(ref_state, state) < TOL


def test_kimi_linear_decode_with_grad_mode_on():
    m = _kimi_linear()
    ids = torch.randint(0, VOCAB, (B, 8))
    with ft.enable(KIMI):
        with torch.no_grad():
            cache = m(input_ids=ids, use_cache=True).cache
        nxt = ids[:, -1:]
        cache2 = copy.deepcopy(cache)
        out = m(input_ids=nxt, cache=cache, use_cache=True).logits
        assert out.requires_grad
        with torch.no_grad():
            ref = m(input_ids=nxt, cache=cache2, use_cache=True).logits
    assert rel_rmse(ref, out.detach()) < TOL


@needs_chunk_kda
def test_kimi_linear_prefill_and_padded_batch():
    m = _kimi_linear()
    ids = torch.randint(0, VOCAB, (B, T))
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, :5] = 0
    with torch.no_grad():
        ref, ref_pad = _logits(m, input_ids=ids), _logits(m, input_ids=ids, attention_mask=mask)
        with ft.enable(KIMI):
            out, out_pad = _logits(m, input_ids=ids), _logits(m, input_ids=ids, attention_mask=mask)
    assert rel_rmse(ref, out) < TOL
    assert rel_rmse(ref_pad[1, 5:], out_pad[1, 5:]) < TOL and rel_rmse(ref_pad[0], out_pad[0]) < TOL


@needs_chunk_kda
def test_kimi_linear_training_step_gradients():
    m = _kimi_linear()
    ids = torch.randint(0, VOCAB, (B, T))

    def grads():
        m.zero_grad()
        m.train()
        loss = m(input_ids=ids, labels=ids).loss
        loss.backward()
        m.eval()
        return loss.detach(), {n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None}

    ref_loss, ref = grads()
    with ft.enable(KIMI):
        loss, out = grads()
    assert rel_rmse(ref_loss, loss) < TOL
    assert ref.keys() == out.keys()
    for n in ref:
        assert (ref[n] - out[n]).norm() <= 1e-4 * ref[n].norm() + 1e-7, n


def test_kimi_chunk_adapter_signature():
    """transformers' fallback signature (chunk_size sixth, where flash-linear-attention's chunk_kda has
    scale); without chunk_kda the adapter says so."""
    import inspect

    params = list(inspect.signature(ft.kimi_chunk_kda).parameters)
    fallback = __import__(_KIMI_MODULE, fromlist=["x"]).chunk_kimi_delta_attention
    assert params == list(inspect.signature(fallback).parameters)
    if not _has_chunk_kda():
        x = torch.zeros(1, 2, 1, 4)
        with pytest.raises(NotImplementedError, match="chunk_kda is not available"):
            ft.kimi_chunk_kda(x, x, x, x, torch.zeros(1, 2, 1))

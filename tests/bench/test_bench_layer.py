"""``fla-ascend bench --layer``: gate then time a whole GatedDeltaNet layer (small on the CPU), and
:func:`fla_ascend.bench.layer.bench_layer` itself."""
import pytest
import torch

from fla_ascend.bench import cli as bench_cli
from fla_ascend.bench.layer import bench_layer
from fla_ascend.cli import main
from fla_ascend.layers import GatedDeltaNet


def test_bench_layer_smoke(device):
    torch.manual_seed(0)
    layer = GatedDeltaNet(hidden_size=64, num_k_heads=2, num_v_heads=4, head_k_dim=32, head_v_dim=32).to(device)
    r = bench_layer(batch_size=1, seq_len=8, dtype=torch.float32, mode="fwd", warmup=0, repeat=1,
                    layer=layer.eval(), device=device)
    assert r["ms"] > 0 and r["mode"] == "fwd"
    with pytest.raises(ValueError, match="mode must be"):
        bench_layer(mode="train")


def test_bench_layer_gates_and_times(capsys):
    assert main(["bench", "--layer"]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "GatedDeltaNet layer" in out


def test_bench_layer_fails_its_gate(monkeypatch, capsys):
    monkeypatch.setitem(bench_cli.LAYER_TOLERANCE, "float32", 0.0)  # nothing passes a zero tolerance
    assert main(["bench", "--layer"]) == 1
    assert "FAIL" in capsys.readouterr().out

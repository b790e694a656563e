"""``fla-ascend bench --layer``: gate then time a whole GatedDeltaNet layer (small on the CPU)."""
from fla_ascend.bench import cli as bench_cli
from fla_ascend.cli import main


def test_bench_layer_gates_and_times(capsys):
    assert main(["bench", "--layer"]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "GatedDeltaNet layer" in out


def test_bench_layer_fails_its_gate(monkeypatch, capsys):
    monkeypatch.setitem(bench_cli.LAYER_TOLERANCE, "float32", 0.0)  # nothing passes a zero tolerance
    assert main(["bench", "--layer"]) == 1
    assert "FAIL" in capsys.readouterr().out

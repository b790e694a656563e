"""The UB reservation probe (fla_ascend.compiler.reserve): the text edit, and on the real planner that a
reservation within the room plans and one beyond it does not. Tests that run the compiler need PyPI's
``ascendnpu-ir`` and skip elsewhere (each probe takes under a second on the fixtures)."""
from pathlib import Path

import pytest

from fla_ascend.compiler.bishengir import compile_module, compiler_available
from fla_ascend.compiler.reserve import ReserveResult, insert_reservation, reserve_fits, reserve_size

HERE = Path(__file__).parent / "ttadapter"
needs_compiler = pytest.mark.skipif(not compiler_available("Ascend910B2"),
                                    reason="needs PyPI's ascendnpu-ir (bishengir-compile, bishengir-opt)")
_MODULE = """module {
  func.func @k_mix_aiv(%arg0: memref<?xi8, #hivm.address_space<gm>>, %arg1: memref<?xbf16, #hivm.address_space<gm>>) {
    %c0 = arith.constant 0 : index
    scf.for %i = %c0 to %c0 step %c0 {
      scf.yield
    }
    return
  }
  func.func @other(%arg0: memref<?xf32, #hivm.address_space<gm>>) {
    return
  }
}
"""


def test_reserve_size_rounds_up_to_32_bytes():
    assert reserve_size(196608, 0.10) == 19680 and reserve_size(253952, 0.10) % 32 == 0
    assert reserve_size(1000, 0.5) == 512


def test_insert_reservation_keeps_the_buffer_live():
    out = insert_reservation(_MODULE, "k_mix_aiv", 19680)
    aiv = out[:out.index("func.func @other")]
    assert aiv.index("%reserve = memref.alloc()") < aiv.index("scf.for") < aiv.index("memref.load %reserve")
    assert "memref<4920xi32, #hivm.address_space<ub>>" in aiv
    # the value read at the end is stored to the first numeric global-memory argument (i8 first, here)
    assert "memref.store %reserve_w, %arg0[%reserve_c0] : memref<?xi8" in aiv
    assert aiv.index("memref.store") < aiv.rindex("    return")
    assert out[out.index("func.func @other"):] == _MODULE[_MODULE.index("func.func @other"):]


@pytest.mark.parametrize("func,nbytes,match", [("missing", 64, "func: @missing"), ("k_mix_aiv", 30, "multiple of 4"),
                                               ("k_mix_aiv", 0, "positive")])
def test_insert_reservation_errors(func, nbytes, match):
    with pytest.raises(ValueError, match=match):
        insert_reservation(_MODULE, func, nbytes)


def test_a5_is_refused():
    with pytest.raises(ValueError, match="A5"):
        reserve_fits("module {}", "Ascend910_9599", {}, 64, 0)


@needs_compiler
def test_reservation_within_and_beyond_the_room(tmp_path):
    """The fp32 add with BLOCK 1024 plans a few KB: a 10% reservation plans (and is counted in the plan),
    one that leaves less UB than the kernel's buffers does not, and the outcome is cached."""
    text = (HERE / "add_f32_1024.mlir").read_text()
    res = compile_module(text, "Ascend910B2", {}, timeout_s=120, cache_dir=str(tmp_path))
    ub = res.facts.planned_bytes["ub"]
    small = reserve_fits(text, "Ascend910B2", {}, 19680, ub, timeout_s=120, cache_dir=str(tmp_path))
    assert small.fits is True and small.replanned_ub == ub and small.reserved_ub >= ub + 19680, small
    again = reserve_fits(text, "Ascend910B2", {}, 19680, ub, timeout_s=120, cache_dir=str(tmp_path))
    assert again.cached and again.fits is True
    big = reserve_fits(text, "Ascend910B2", {}, 196608 - ub // 2 // 32 * 32, ub, timeout_s=120,
                       cache_dir=str(tmp_path))
    assert big.fits is False and "overflow" in big.reason, big
    # a planned figure no dumped module reproduces: undecided, not a pass
    odd = reserve_fits(text, "Ascend910B2", {}, 19680, ub + 32, timeout_s=120, cache_dir=str(tmp_path))
    assert odd.fits is None and "replans" in odd.reason


@pytest.mark.parametrize("fits,severity", [(True, "info"), (False, "error"), (None, "error")])
def test_headroom_finding_follows_the_probe(fits, severity):
    from fla_ascend.check import compiled
    from fla_ascend.check.runner import CaseResult
    from fla_ascend.compiler.bishengir import CompileResult, ModuleFacts
    from fla_ascend.tiling.chips import get_chip

    spec = get_chip("Ascend910B2")
    r = CaseResult(kernel="m.k", config="c", chip=spec.name)
    facts = ModuleFacts(core_type="MIX", planned_bytes={"ub": int(0.97 * spec.ub_bytes)})
    probe = ReserveResult(fits, 19680, reason="" if fits else "why")
    compiled._apply(r, CompileResult(ok=True, chip=spec.name, facts=facts), spec, False, probe)
    assert [(f["code"], f["severity"]) for f in r.findings] == [("ub_headroom", severity)]
    assert r.ub_reserve["fits"] is fits


def test_probe_errors_are_undecided_not_raised(tmp_path, monkeypatch):
    """A bishengir-opt that cannot run (here: a missing binary) gives an undecided result, not an
    exception that would stop the check."""
    from fla_ascend.compiler import reserve

    monkeypatch.setattr(reserve, "compiler_path", lambda chip: str(tmp_path / "bin" / "bishengir-compile"))
    monkeypatch.setattr(reserve, "compiler_version", lambda path: "test")
    res = reserve_fits("module {}", "Ascend910B2", {}, 64, 1000, timeout_s=10, cache_dir=str(tmp_path))
    assert res.fits is None and "Error" in res.reason

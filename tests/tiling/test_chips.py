import pytest

from fla_ascend.tiling import chips


def test_triton_ascend_arch_names_all_known():
    # the A2/A3/A5 names triton-ascend 3.2.0 accepts in TRITON_ASCEND_ARCH
    for n in ["Ascend910B1", "Ascend910B2", "Ascend910B3", "Ascend910B4", "Ascend910_9362", "Ascend910_9392",
              "Ascend910_9579", "Ascend910_9599"]:
        assert chips.get_chip(n).name == n


def test_aliases_and_case():
    assert chips.get_chip("ascend910b2").name == "Ascend910B2"
    assert chips.get_chip("Ascend910_95").name == "Ascend910_9599"
    # Ascend950PR is no compiler target: only an alias of a name bishengir-compile-a5 takes
    assert chips.get_chip("Ascend950PR").name == "Ascend910_9599"
    assert "Ascend950PR" not in chips.CHIPS


def test_split_chip_ratio_and_peak():
    for c in chips.CHIPS.values():
        assert c.vector_cores == 2 * c.cube_cores
        assert c.ub_bytes in (196608, 253952)
        assert c.source and c.confidence
    b2 = chips.get_chip("Ascend910B2")
    assert b2.peak_bf16_flops == pytest.approx(353.9e12, rel=1e-3)
    assert b2.cores("cube") == 24 and b2.cores("vector") == 48
    assert chips.get_chip("Ascend910B3").cube_cores == 20


def test_bad_names():
    with pytest.raises(ValueError, match="Ascend310P3"):
        chips.get_chip("Ascend310P3")
    with pytest.raises(TypeError):
        chips.get_chip(910)
    with pytest.raises(ValueError, match="kind"):
        chips.get_chip("Ascend910B2").cores("gpu")


def test_detect_from_env(monkeypatch):
    """get_chip(None) and detect_chip give the active target's chip; for a target without one (the
    default) the environment's (environment_chip: TRITON_ASCEND_ARCH), else DEFAULT_CHIP."""
    from fla_ascend import backend

    monkeypatch.setenv("TRITON_ASCEND_ARCH", "Ascend910B3")
    assert chips.environment_chip() == "Ascend910B3"
    monkeypatch.setenv("TRITON_ASCEND_ARCH", "nonsense")
    assert chips.environment_chip() is None
    with backend.use(backend.current().replace(chip=chips.get_chip("Ascend910B3"))):
        assert chips.detect_chip() == "Ascend910B3"
        assert chips.get_chip(None).name == "Ascend910B3"
    with backend.use(backend.current().replace(chip=None, device_type="cpu")):  # the environment's: none here
        assert chips.detect_chip() is None
        assert chips.get_chip(None).name == chips.DEFAULT_CHIP
    monkeypatch.setenv("TRITON_ASCEND_ARCH", "Ascend910B3")
    with backend.use(backend.current().replace(chip=None, device_type="cpu")):
        assert chips.get_chip(None).name == "Ascend910B3"

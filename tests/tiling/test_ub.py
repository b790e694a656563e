import pytest
import torch

from fla_ascend.tiling import ub
from fla_ascend.tiling.ub import Tile

TILES = [Tile(("BT", "BK"), "in", "k"), Tile(("BK", "BV"), "fp32", "h", buffered=False)]


def test_predict_counts_multibuffer_only_for_buffered():
    e = ub.predict(TILES, {"BT": 64, "BK": 128, "BV": 64, "in_bytes": 2}, "Ascend910B2")
    assert e.raw == 64 * 128 * 2 + 128 * 64 * 4
    assert e.charged == 2 * 64 * 128 * 2 + 128 * 64 * 4
    assert e.budget == int(196608 * ub.DEFAULT_MARGIN)
    assert ub.predict(TILES, {"BT": 64, "BK": 128, "BV": 64, "in_bytes": 2}, multibuffer=1).charged == e.raw


def test_fit_tiles_picks_largest_that_fits():
    fixed = {"BT": 64, "BK": 128, "in_bytes": 2}
    got = ub.fit_tiles(TILES, {"BV": [32, 64, 128, 256, 512]}, fixed=fixed, chip="Ascend910B2")
    assert got == {"BV": 256}  # 2 x 16 KiB + 128 KiB = 160 KiB <= 0.85 x 192 KiB; 512 needs 288 KiB
    assert ub.predict(TILES, {**fixed, "BV": 512}).charged > ub.budget("Ascend910B2")
    assert ub.fit_tiles(TILES, {"BV": [128, 256]}, fixed=fixed, chip="Ascend910B2", margin=0.5) == {"BV": 128}


def test_fit_tiles_two_names_and_chip_difference():
    tiles = [Tile(("BT", "BD"), "fp32")] * 5
    b2 = ub.fit_tiles(tiles, {"BT": [16, 32, 64, 128], "BD": [64, 128, 256]}, chip="Ascend910B2")
    a5 = ub.fit_tiles(tiles, {"BT": [16, 32, 64, 128], "BD": [64, 128, 256]}, chip="Ascend950PR")
    assert ub.fits(tiles, b2, "Ascend910B2")
    assert b2["BT"] * b2["BD"] <= a5["BT"] * a5["BD"]
    assert b2["BT"] * b2["BD"] == 4096  # 5 x 16 KiB x 2 = 160 KiB fits, 8192 elements would not


def test_callable_tiles_and_expressions():
    assert ub.fit_tiles(lambda s: s["B"] * 1024, {"B": [1, 2, 4, 64, 128]}, chip="Ascend910B2") == {"B": 64}
    t = Tile(("BT + W - 1", "cdiv(D, 2)"), torch.bfloat16)
    assert t.nbytes({"BT": 64, "W": 4, "D": 10}) == 67 * 5 * 2


def test_errors():
    with pytest.raises(ValueError, match="no tile sizes fit"):
        ub.fit_tiles(TILES, {"BV": [4096]}, fixed={"BT": 64, "BK": 128, "in_bytes": 2})
    with pytest.raises(ValueError, match="needs sizes"):
        ub.predict(TILES, {"BT": 64})
    with pytest.raises(ValueError, match="margin"):
        ub.budget("Ascend910B2", margin=1.5)
    with pytest.raises(ValueError, match="multibuffer"):
        ub.predict(TILES, {"BT": 1, "BK": 1, "BV": 1, "in_bytes": 2}, multibuffer=0)
    with pytest.raises(TypeError):
        ub.dtype_bytes("complex77")
    with pytest.raises(ValueError, match="unknown function"):
        Tile(("__import__('os')",)).nbytes({})
    with pytest.raises(ValueError, match="both fixed"):
        ub.fit_tiles(TILES, {"BV": [1]}, fixed={"BV": 2})


def test_multibuffered_plan_that_does_not_fit_is_charged_the_whole_ub():
    # bishengir-compile multi-buffers only when the doubled plan fits; otherwise it plans at most the UB
    ub_bytes = 196608
    tiles = [ub.Tile(("N",), "int8")]
    assert ub.predict(tiles, {"N": 90000}, "Ascend910B2", margin=1.0).charged == 180000  # doubled fits
    assert ub.predict(tiles, {"N": 100000}, "Ascend910B2", margin=1.0).charged == ub_bytes  # doubled does not
    assert ub.predict(tiles, {"N": 200000}, "Ascend910B2", margin=1.0).charged == 200000  # once does not fit
    assert ub.predict(tiles, {"N": 100000}, "Ascend910B2", multibuffer=1).charged == 100000
    # so such tiles fit only the whole UB
    assert ub.fit_tiles(tiles, {"N": [100000, 90000]}, chip="Ascend910B2", margin=1.0) == {"N": 100000}
    assert ub.fit_tiles(tiles, {"N": [100000, 90000]}, chip="Ascend910B2", margin=0.95) == {"N": 90000}

"""planeval on a small synthetic compiled module: loop trip counts bound from the launch's arguments
and grid, tail sizes from affine.min, DMA bytes, Cube MACs, vector bytes, scalar loops, syncs,
unresolved bounds. Pure text: runs in every environment."""
import pytest

from fla_ascend.compiler import planeval

MODULE = """\
#map = affine_map<()[s0, s1] -> (64, s0 - s1)>
#map1 = affine_map<(d0) -> (d0 * 4096)>
module attributes {hivm.module_core_type = #hivm.module_core_type<MIX>} {
  func.func @k_mix_aic(%arg0: i64 {hacc.arg_type = #hacc.arg_type<ffts_base_address>}, %arg1: memref<?xi8, #hivm.address_space<gm>> {hacc.arg_type = #hacc.arg_type<workspace>}, %arg2: memref<?xbf16, #hivm.address_space<gm>> {tt.divisibility = 16 : i32}, %arg3: i32, %arg4: i32, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32) attributes {hacc.entry, hacc.function_kind = #hacc.function_kind<DEVICE>, hivm.func_core_type = #hivm.func_core_type<AIC>} {
    %c0 = arith.constant 0 : index
    %c64 = arith.constant 64 : index
    %c128 = arith.constant 128 : index
    %c1_i32 = arith.constant 1 : i32
    %c0_i64 = arith.constant 0 : i64
    %0 = hivm.hir.get_block_idx -> i64
    %1 = arith.trunci %0 : i64 to i32
    %2 = hivm.hir.pointer_cast(%c0_i64) : memref<4x8x16x16xbf16, #hivm.address_space<cbuf>>
    scf.for %arg9 = %1 to %arg4 step %arg5  : i32 {
      %3 = arith.index_cast %arg3 : i32 to index
      scf.for %arg10 = %c0 to %3 step %c64 {
        %4 = affine.min #map()[%3, %arg10]
        %rc = memref.reinterpret_cast %arg2 to offset: [0], sizes: [64, 128], strides: [128, 1] : memref<?xbf16, #hivm.address_space<gm>> to memref<64x128xbf16, strided<[128, 1]>, #hivm.address_space<gm>>
        %sv = memref.subview %rc[0, 0] [%4, 128] [1, 1] : memref<64x128xbf16, strided<[128, 1]>, #hivm.address_space<gm>> to memref<?x128xbf16, strided<[128, 1]>, #hivm.address_space<gm>>
        %cast = memref.cast %sv : memref<?x128xbf16, strided<[128, 1]>, #hivm.address_space<gm>> to memref<?x?xbf16, strided<[?, ?], offset: ?>, #hivm.address_space<gm>>
        %cast_0 = memref.cast %2 : memref<4x8x16x16xbf16, #hivm.address_space<cbuf>> to memref<?x?x?x?xbf16, strided<[?, ?, ?, ?], offset: ?>, #hivm.address_space<cbuf>>
        func.call @nd2nz_bfloat16_t(%cast, %cast_0) : (memref<?x?xbf16, strided<[?, ?], offset: ?>, #hivm.address_space<gm>>, memref<?x?x?x?xbf16, strided<[?, ?, ?, ?], offset: ?>, #hivm.address_space<cbuf>>) -> ()
        %true = arith.constant true
        func.call @mma_tile_bfloat16_t_to_float(%cast_0, %cast_0, %true, %4, %c128, %c64, %cast_0) : (memref<?x?x?x?xbf16>, memref<?x?x?x?xbf16>, i1, index, index, index, memref<?x?x?x?xbf16>) -> ()
        %5 = affine.apply #map1(%c64)
        %view = memref.view %arg1[%5][] : memref<?xi8, #hivm.address_space<gm>> to memref<64x64xf32, #hivm.address_space<gm>>
        %u = hivm.hir.pointer_cast(%c0_i64) : memref<64x64xf32, #hivm.address_space<ub>>
        %cv = memref.cast %view : memref<64x64xf32, #hivm.address_space<gm>> to memref<?x?xf32, strided<[?, ?], offset: ?>, #hivm.address_space<gm>>
        %cu = memref.cast %u : memref<64x64xf32, #hivm.address_space<ub>> to memref<?x?xf32, strided<[?, ?], offset: ?>, #hivm.address_space<ub>>
        func.call @load_gm_to_ubuf_2d_float(%cv, %cu) : (memref<?x?xf32, strided<[?, ?], offset: ?>, #hivm.address_space<gm>>, memref<?x?xf32, strided<[?, ?], offset: ?>, #hivm.address_space<ub>>) -> ()
        func.call @vexp_1d_float(%cu, %cu) : (memref<?x?xf32, strided<[?, ?], offset: ?>, #hivm.address_space<ub>>, memref<?x?xf32, strided<[?, ?], offset: ?>, #hivm.address_space<ub>>) -> ()
        func.call @store_ubuf_to_gm_2d_float(%cu, %cv) : (memref<?x?xf32, strided<[?, ?], offset: ?>, #hivm.address_space<ub>>, memref<?x?xf32, strided<[?, ?], offset: ?>, #hivm.address_space<gm>>) -> ()
        hivm.hir.sync_block_wait[<CUBE>, <PIPE_MTE3>, <PIPE_S>] flag = 1
        scf.for %arg11 = %c0 to %c64 step %c1 {
          %6 = memref.load %u[%arg11, %arg11] : memref<64x64xf32, #hivm.address_space<ub>>
        }
      }
    }
    %l = memref.load %arg2[%c0] : memref<?xbf16, #hivm.address_space<gm>>
    %n = arith.fptosi %l : bf16 to i32
    scf.for %arg12 = %c1_i32 to %n step %c1_i32  : i32 {
      hivm.hir.sync_block_wait[<CUBE>, <PIPE_MTE3>, <PIPE_S>] flag = 2
    }
    return
  }
}
"""


@pytest.fixture(scope="module")
def mod():
    return planeval.parse(MODULE)


def test_parse_finds_the_device_function(mod):
    fns = mod.device_functions()
    assert [f.name for f in fns] == ["k_mix_aic"] and fns[0].core == "AIC"
    assert [n for n, _t, _a in fns[0].kernel_args()] == [f"%arg{i}" for i in range(2, 9)]
    assert mod.core_type == "MIX"


@pytest.mark.parametrize("T,n_tasks,block,tasks_done", [(256, 5, 0, 3), (200, 5, 1, 2), (64, 1, 1, 0)])
def test_counts_follow_the_launch(mod, T, n_tasks, block, tasks_done):
    # scalars: ptr, T, n_tasks, n_programs; grid (2,)
    c = planeval.evaluate(mod, mod.device_functions()[0], [None, T, n_tasks, 2], (2,), block)
    chunks = -(-T // 64)
    rows = T  # the last chunk's tail rows: affine.min(64, T - i)
    assert c.mte2_bytes == tasks_done * (rows * 128 * 2 + chunks * 64 * 64 * 4) + 2  # + the scalar bf16 load
    assert c.mte3_bytes == tasks_done * chunks * 64 * 64 * 4
    assert c.ws_bytes == tasks_done * chunks * 2 * 64 * 64 * 4  # the workspace view, both directions
    assert c.macs.get("bf16", 0) == tasks_done * rows * 128 * 64
    assert c.vector_bytes == c.vector_slow_bytes == tasks_done * chunks * 64 * 64 * 4
    assert c.scalar_loop_iters == tasks_done * chunks * 64
    assert c.syncs == tasks_done * chunks + 1  # + the unresolved loop, counted once
    assert c.scalar_gm == 1
    assert any("not resolved" in u for u in c.unresolved)


def test_argument_count_mismatch_is_an_error(mod):
    with pytest.raises(ValueError, match="launch arguments"):
        planeval.evaluate(mod, mod.device_functions()[0], [None, 1], (1,), 0)


def test_affine_expressions():
    assert planeval._apply_map("()[s0, s1, s2] -> ((s0 + s1 floordiv 4) mod 3, s2 ceildiv 64)", [], [5, 9, 65]) == [1, 2]
    assert planeval._apply_map("(d0)[s0] -> (d0 * 73760 + 16384, -s0)", [2], [3]) == [163904, -3]


def test_not_a_module():
    with pytest.raises(ValueError, match="not an MLIR module"):
        planeval.parse("hello")

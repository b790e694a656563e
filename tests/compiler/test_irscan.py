"""IR scanner on hand-written ttadapter snippets (no compiler needed)."""
from fla_ascend.compiler.irscan import scan

IR = '''
module {
  func.func private @helper(tensor<64xf32>) -> tensor<64xf32>
  func.func @k_kernel(%arg2: memref<?xf32>) attributes {mix_mode = "mix", parallel_mode = "simd"} {
    %alloc = memref.alloc() : memref<64x128xbf16> loc(#loc3)
    %alloc_1 = memref.alloc() {alignment = 64 : i64} : memref<64xf32>
    %alloc_2 = memref.alloc(%0) : memref<?x4xf32>
    %rc = memref.reinterpret_cast %arg2 to offset: [%1], sizes: [64], strides: [%5] : memref<?xf32> to memref<64xf32>
    %rc2 = memref.reinterpret_cast %arg2 to offset: [%1], sizes: [64, 4], strides: [4, 1] : memref<?xf32> to memref<64x4xf32>
    %rc3 = memref.reinterpret_cast %arg2 to offset: [%1], sizes: [1], strides: [8] : memref<?xf32> to memref<1xf32>
    scf.for %i = %c0 to %c64 step %c1 {
    } {DiscreteMemAccess}
    %m = arith.cmpi slt, %a, %b : tensor<64xi32>
    %s = arith.addi %a, %b : tensor<64xi64>
    linalg.matmul ins(%x, %y : tensor<64x64xbf16>, tensor<64x64xbf16>) outs(%z : tensor<64x64xf32>)
  }
}
#loc1 = loc("/x/y/kern.py":12:3)
#loc3 = loc(callsite(#loc1 at #loc1))
'''


def test_scan_reads_every_fact():
    f = scan(IR, "k_kernel")
    assert f.mix_mode == "mix"
    assert f.alloc_bytes == 64 * 128 * 2 + 64 * 4
    assert f.allocs[0].where == "kern.py:12"
    assert f.dynamic_allocs == 1
    assert len(f.strided) == 1 and f.strided[0].strides == "%5"
    assert len(f.discrete_loops) == 1
    assert len(f.int_compares) == 1 and len(f.i64_adds) == 1
    assert f.matmuls == 1


def test_scan_clean_ir():
    f = scan('func.func @k(%a: i32) attributes {mix_mode = "aiv"} {\n}\n')
    assert f.mix_mode == "aiv" and f.alloc_bytes == 0 and not f.strided and not f.discrete_loops

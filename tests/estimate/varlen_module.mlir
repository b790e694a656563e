module attributes {hivm.module_core_type = #hivm.module_core_type<AIV>} {
  func.func @k(%arg0: memref<?xi64, #hivm.address_space<gm>> {tt.divisibility = 16 : i32}, %arg1: memref<?xf32, #hivm.address_space<gm>> {tt.divisibility = 16 : i32}, %arg2: i32, %arg3: i32, %arg4: i32) attributes {hacc.entry, hacc.function_kind = #hacc.function_kind<DEVICE>, hivm.func_core_type = #hivm.func_core_type<AIV>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c0_i64 = arith.constant 0 : i64
    %0 = hivm.hir.get_block_idx -> i64
    %1 = arith.index_cast %0 : i64 to index
    %2 = arith.addi %1, %c1 : index
    %rc = memref.reinterpret_cast %arg0 to offset: [%1], sizes: [1], strides: [1] : memref<?xi64, #hivm.address_space<gm>> to memref<1xi64, strided<[1], offset: ?>, #hivm.address_space<gm>>
    %bos = memref.load %rc[%c0] : memref<1xi64, strided<[1], offset: ?>, #hivm.address_space<gm>>
    %rc_0 = memref.reinterpret_cast %arg0 to offset: [%2], sizes: [1], strides: [1] : memref<?xi64, #hivm.address_space<gm>> to memref<1xi64, strided<[1], offset: ?>, #hivm.address_space<gm>>
    %eos = memref.load %rc_0[%c0] : memref<1xi64, strided<[1], offset: ?>, #hivm.address_space<gm>>
    %3 = arith.index_cast %bos : i64 to index
    %4 = arith.index_cast %eos : i64 to index
    %u = hivm.hir.pointer_cast(%c0_i64) : memref<64xf32, #hivm.address_space<ub>>
    scf.for %i = %3 to %4 step %c1 {
      %cu = memref.cast %u : memref<64xf32, #hivm.address_space<ub>> to memref<?xf32, strided<[?], offset: ?>, #hivm.address_space<ub>>
      func.call @vexp_1d_float(%cu, %cu) : (memref<?xf32, strided<[?], offset: ?>, #hivm.address_space<ub>>, memref<?xf32, strided<[?], offset: ?>, #hivm.address_space<ub>>) -> ()
    }
    return
  }
}

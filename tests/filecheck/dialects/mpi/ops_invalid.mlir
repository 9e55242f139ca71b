// RUN: shardc-opt %s --split-input-file --verify-diagnostics

// Operand and result counts.

func.func @comm_rank_without_comm() {
  // expected-error @+1 {{'mpi.comm_rank' op requires a single operand}}
  %rank = "mpi.comm_rank"() : () -> i32
  return
}

// -----

func.func @comm_rank_without_results(%comm: !mpi.comm) {
  // expected-error @+1 {{'mpi.comm_rank' op expected 1 or more results}}
  "mpi.comm_rank"(%comm) : (!mpi.comm) -> ()
  return
}

// -----

func.func @comm_rank_two_retvals(%comm: !mpi.comm) {
  // expected-error @+1 {{'mpi.comm_rank' op result group starting at #0 requires 0 or 1 element, but found 2}}
  %r:3 = "mpi.comm_rank"(%comm) : (!mpi.comm) -> (!mpi.retval, !mpi.retval, i32)
  return
}

// -----

func.func @init_with_operand(%x: i32) {
  // expected-error @+1 {{'mpi.init' op requires zero operands}}
  "mpi.init"(%x) : (i32) -> ()
  return
}

// -----

func.func @finalize_two_retvals() {
  // expected-error @+1 {{'mpi.finalize' op result group starting at #0 requires 0 or 1 element, but found 2}}
  %r:2 = "mpi.finalize"() : () -> (!mpi.retval, !mpi.retval)
  return
}

// -----

func.func @comm_world_without_result() {
  // expected-error @+1 {{'mpi.comm_world' op requires one result}}
  "mpi.comm_world"() : () -> ()
  return
}

// -----

func.func @send_without_comm(%buf: memref<4xf32>, %tag: i32) {
  // expected-error @+1 {{'mpi.send' op expected 4 operands, but found 3}}
  "mpi.send"(%buf, %tag, %tag) : (memref<4xf32>, i32, i32) -> ()
  return
}

// -----

func.func @irecv_without_request(%buf: memref<4xf32>, %tag: i32, %comm: !mpi.comm) {
  // expected-error @+1 {{'mpi.irecv' op expected 1 or more results}}
  "mpi.irecv"(%buf, %tag, %tag, %comm) : (memref<4xf32>, i32, i32, !mpi.comm) -> ()
  return
}

// -----

// Result types.

func.func @comm_rank_i64(%comm: !mpi.comm) {
  // expected-error @+1 {{'mpi.comm_rank' op result #0 must be 32-bit signless integer, but got 'i64'}}
  %rank = mpi.comm_rank(%comm) : i64
  return
}

// -----

func.func @comm_size_retval_not_first(%comm: !mpi.comm) {
  // expected-error @+1 {{'mpi.comm_size' op result #0 must be MPI function call return value (!mpi.retval), but got 'i32'}}
  %a, %b = mpi.comm_size(%comm) : i32, i32
  return
}

// -----

func.func @comm_split_to_request(%comm: !mpi.comm, %c: i32) {
  // expected-error @+1 {{'mpi.comm_split' op result #0 must be MPI communicator handler, but got '!mpi.request'}}
  %new = mpi.comm_split(%comm, %c, %c) : !mpi.request
  return
}

// -----

func.func @init_i32() {
  // expected-error @+1 {{'mpi.init' op result #0 must be MPI function call return value (!mpi.retval), but got 'i32'}}
  %e = mpi.init : i32
  return
}

// -----

func.func @comm_world_retval() {
  // expected-error @+1 {{'mpi.comm_world' op result #0 must be MPI communicator handler, but got '!mpi.retval'}}
  %w = mpi.comm_world : !mpi.retval
  return
}

// -----

func.func @isend_retval_only(%buf: memref<4xf32>, %tag: i32, %comm: !mpi.comm) {
  // expected-error @+1 {{'mpi.isend' op result #0 must be MPI asynchronous request handler, but got '!mpi.retval'}}
  %r = mpi.isend(%buf, %tag, %tag, %comm) : memref<4xf32>, i32, i32 -> !mpi.retval
  return
}

// -----

func.func @wait_i1(%req: !mpi.request) {
  // expected-error @+1 {{'mpi.wait' op result #0 must be MPI function call return value (!mpi.retval), but got 'i1'}}
  %r = mpi.wait(%req) : !mpi.request -> i1
  return
}

// -----

func.func @barrier_i32(%comm: !mpi.comm) {
  // expected-error @+1 {{'mpi.barrier' op result #0 must be MPI function call return value (!mpi.retval), but got 'i32'}}
  %r = mpi.barrier(%comm) -> i32
  return
}

// -----

func.func @finalize_i1() {
  // expected-error @+1 {{'mpi.finalize' op result #0 must be MPI function call return value (!mpi.retval), but got 'i1'}}
  %r = mpi.finalize : i1
  return
}

// -----

func.func @retval_check_i32(%rv: !mpi.retval) {
  // expected-error @+1 {{'mpi.retval_check' op result #0 must be 1-bit signless integer, but got 'i32'}}
  %ok = mpi.retval_check %rv = <MPI_SUCCESS> : i32
  return
}

// -----

func.func @error_class_to_i32(%rv: !mpi.retval) {
  // expected-error @+1 {{'mpi.error_class' op result #0 must be MPI function call return value (!mpi.retval), but got 'i32'}}
  %c = "mpi.error_class"(%rv) : (!mpi.retval) -> i32
  return
}

// -----

// Operand types.

func.func @comm_rank_of_i32(%x: i32) {
  // expected-error @+1 {{'mpi.comm_rank' op operand #0 must be MPI communicator handler, but got 'i32'}}
  %rank = "mpi.comm_rank"(%x) : (i32) -> i32
  return
}

// -----

func.func @comm_split_i64_color(%comm: !mpi.comm, %c: i64, %k: i32) {
  // expected-error @+1 {{'mpi.comm_split' op operand #1 must be 32-bit signless integer, but got 'i64'}}
  %new = "mpi.comm_split"(%comm, %c, %k) : (!mpi.comm, i64, i32) -> !mpi.comm
  return
}

// -----

func.func @send_tensor(%t: tensor<4xf32>, %tag: i32, %comm: !mpi.comm) {
  // expected-error @+1 {{'mpi.send' op operand #0 must be memref of any type values, but got 'tensor<4xf32>'}}
  "mpi.send"(%t, %tag, %tag, %comm) : (tensor<4xf32>, i32, i32, !mpi.comm) -> ()
  return
}

// -----

func.func @recv_unranked(%buf: memref<*xf32>, %tag: i32, %comm: !mpi.comm) {
  // expected-error @+1 {{'mpi.recv' op operand #0 must be memref of any type values, but got 'memref<*xf32>'}}
  "mpi.recv"(%buf, %tag, %tag, %comm) : (memref<*xf32>, i32, i32, !mpi.comm) -> ()
  return
}

// -----

func.func @send_i64_tag(%buf: memref<4xf32>, %tag: i64, %comm: !mpi.comm) {
  // expected-error @+1 {{'mpi.send' op operand #1 must be 32-bit signless integer, but got 'i64'}}
  mpi.send(%buf, %tag, %tag, %comm) : memref<4xf32>, i64, i64
  return
}

// -----

func.func @irecv_source_i16(%buf: memref<4xf32>, %tag: i32, %src: i16, %comm: !mpi.comm) {
  // expected-error @+1 {{'mpi.irecv' op operand #2 must be 32-bit signless integer, but got 'i16'}}
  %req = mpi.irecv(%buf, %tag, %src, %comm) : memref<4xf32>, i32, i16 -> !mpi.request
  return
}

// -----

func.func @isend_comm_is_i32(%buf: memref<4xf32>, %tag: i32) {
  // expected-error @+1 {{'mpi.isend' op operand #3 must be MPI communicator handler, but got 'i32'}}
  %req = "mpi.isend"(%buf, %tag, %tag, %tag) : (memref<4xf32>, i32, i32, i32) -> !mpi.request
  return
}

// -----

func.func @allreduce_tensor_out(%buf: memref<4xf32>, %t: tensor<4xf32>, %comm: !mpi.comm) {
  // expected-error @+1 {{'mpi.allreduce' op operand #1 must be memref of any type values, but got 'tensor<4xf32>'}}
  "mpi.allreduce"(%buf, %t, %comm) <{op = 3 : i32}> : (memref<4xf32>, tensor<4xf32>, !mpi.comm) -> ()
  return
}

// -----

func.func @barrier_on_request(%req: !mpi.request) {
  // expected-error @+1 {{'mpi.barrier' op operand #0 must be MPI communicator handler, but got '!mpi.request'}}
  "mpi.barrier"(%req) : (!mpi.request) -> ()
  return
}

// -----

func.func @wait_on_comm(%comm: !mpi.comm) {
  // expected-error @+1 {{'mpi.wait' op operand #0 must be MPI asynchronous request handler, but got '!mpi.comm'}}
  "mpi.wait"(%comm) : (!mpi.comm) -> ()
  return
}

// -----

func.func @retval_check_of_i32(%x: i32) {
  // expected-error @+1 {{'mpi.retval_check' op operand #0 must be MPI function call return value (!mpi.retval), but got 'i32'}}
  %ok = "mpi.retval_check"(%x) <{errclass = #mpi.errclass<MPI_SUCCESS>}> : (i32) -> i1
  return
}

// -----

func.func @error_class_of_i32(%x: i32) {
  // expected-error @+1 {{'mpi.error_class' op operand #0 must be MPI function call return value (!mpi.retval), but got 'i32'}}
  %c = "mpi.error_class"(%x) : (i32) -> !mpi.retval
  return
}

// -----

// Attributes.

func.func @allreduce_without_op(%buf: memref<4xf32>, %comm: !mpi.comm) {
  // expected-error @+1 {{'mpi.allreduce' op requires attribute 'op'}}
  "mpi.allreduce"(%buf, %buf, %comm) : (memref<4xf32>, memref<4xf32>, !mpi.comm) -> ()
  return
}

// -----

func.func @allreduce_unknown_code(%buf: memref<4xf32>, %comm: !mpi.comm) {
  // expected-error @+1 {{invalid properties {op = 14 : i32} for op mpi.allreduce: Invalid attribute `op` in property conversion: 14 : i32}}
  "mpi.allreduce"(%buf, %buf, %comm) <{op = 14 : i32}> : (memref<4xf32>, memref<4xf32>, !mpi.comm) -> ()
  return
}

// -----

func.func @allreduce_i64_code(%buf: memref<4xf32>, %comm: !mpi.comm) {
  // expected-error @+1 {{invalid properties {op = 3 : i64} for op mpi.allreduce: Invalid attribute `op` in property conversion: 3 : i64}}
  "mpi.allreduce"(%buf, %buf, %comm) <{op = 3 : i64}> : (memref<4xf32>, memref<4xf32>, !mpi.comm) -> ()
  return
}

// -----

func.func @allreduce_name_as_property(%buf: memref<4xf32>, %comm: !mpi.comm) {
  // expected-error @+1 {{invalid properties {op = "MPI_SUM"} for op mpi.allreduce: Invalid attribute `op` in property conversion: "MPI_SUM"}}
  "mpi.allreduce"(%buf, %buf, %comm) <{op = "MPI_SUM"}> : (memref<4xf32>, memref<4xf32>, !mpi.comm) -> ()
  return
}

// -----

func.func @allreduce_unknown_keyword(%buf: memref<4xf32>, %comm: !mpi.comm) {
  // expected-error @+1 {{custom op 'mpi.allreduce' expected string or keyword containing one of the following enum values for attribute 'op' [MPI_OP_NULL, MPI_MAX, MPI_MIN, MPI_SUM, MPI_PROD, MPI_LAND, MPI_BAND, MPI_LOR, MPI_BOR, MPI_LXOR, MPI_BXOR, MPI_MINLOC, MPI_MAXLOC, MPI_REPLACE]}}
  mpi.allreduce(%buf, %buf, MPI_AVG, %comm) : memref<4xf32>, memref<4xf32>
  return
}

// -----

func.func @allreduce_unknown_string(%buf: memref<4xf32>, %comm: !mpi.comm) {
  // expected-error @+1 {{custom op 'mpi.allreduce' invalid op attribute specification: "MPI_AVG"}}
  mpi.allreduce(%buf, %buf, "MPI_AVG", %comm) : memref<4xf32>, memref<4xf32>
  return
}

// -----

func.func @retval_check_without_class(%rv: !mpi.retval) {
  // expected-error @+1 {{'mpi.retval_check' op requires attribute 'errclass'}}
  %ok = "mpi.retval_check"(%rv) : (!mpi.retval) -> i1
  return
}

// -----

func.func @retval_check_integer_class(%rv: !mpi.retval) {
  // expected-error @+1 {{invalid properties {errclass = 0 : i32} for op mpi.retval_check: Invalid attribute `errclass` in property conversion: 0 : i32}}
  %ok = "mpi.retval_check"(%rv) <{errclass = 0 : i32}> : (!mpi.retval) -> i1
  return
}

// -----

// ORACLE-SKIP: mpi.allgather and mpi.reduce_scatter_block are newer than mlir-opt 22.1.8

func.func @allgather_tensor(%t: tensor<4xf32>, %out: memref<8xf32>, %comm: !mpi.comm) {
  // expected-error @+1 {{'mpi.allgather' op operand #0 must be memref of any type values, but got 'tensor<4xf32>'}}
  "mpi.allgather"(%t, %out, %comm) : (tensor<4xf32>, memref<8xf32>, !mpi.comm) -> ()
  return
}

// -----

// ORACLE-SKIP: mpi.allgather and mpi.reduce_scatter_block are newer than mlir-opt 22.1.8

func.func @allgather_without_comm(%in: memref<4xf32>, %out: memref<8xf32>) {
  // expected-error @+1 {{'mpi.allgather' op expected 3 operands, but found 2}}
  "mpi.allgather"(%in, %out) : (memref<4xf32>, memref<8xf32>) -> ()
  return
}

// -----

// ORACLE-SKIP: mpi.allgather and mpi.reduce_scatter_block are newer than mlir-opt 22.1.8

func.func @reduce_scatter_block_mixed_elements(%in: memref<4xf32>, %out: memref<1xf64>, %comm: !mpi.comm) {
  // expected-error @+1 {{'mpi.reduce_scatter_block' op sendbuf and recvbuf must have the same element type}}
  mpi.reduce_scatter_block(%in, %out, MPI_SUM, %comm) : memref<4xf32>, memref<1xf64>
  return
}

// -----

// ORACLE-SKIP: mpi.allgather and mpi.reduce_scatter_block are newer than mlir-opt 22.1.8

func.func @reduce_scatter_block_rank0(%in: memref<4xf32>, %out: memref<f32>, %comm: !mpi.comm) {
  // expected-error @+1 {{'mpi.reduce_scatter_block' op operand #1 must be non-0-ranked.memref of any type values, but got 'memref<f32>'}}
  mpi.reduce_scatter_block(%in, %out, MPI_SUM, %comm) : memref<4xf32>, memref<f32>
  return
}

// -----

// ORACLE-SKIP: mpi.allgather and mpi.reduce_scatter_block are newer than mlir-opt 22.1.8

func.func @reduce_scatter_block_unknown_code(%in: memref<4xf32>, %out: memref<1xf32>, %comm: !mpi.comm) {
  // expected-error @+1 {{invalid properties {op = -1 : i32} for op mpi.reduce_scatter_block: Invalid attribute `op` in property conversion: -1 : i32}}
  "mpi.reduce_scatter_block"(%in, %out, %comm) <{op = -1 : i32}> : (memref<4xf32>, memref<1xf32>, !mpi.comm) -> ()
  return
}

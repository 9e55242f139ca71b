// RUN: shardc-opt %s --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | shardc-opt --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | filecheck %s --check-prefix=GENERIC

// Every mpi op in each of its forms (with and without the optional !mpi.retval).

// CHECK-LABEL: func.func @lifecycle
// GENERIC-LABEL: sym_name = "lifecycle"
func.func @lifecycle() {
  // CHECK: mpi.init{{$}}
  // GENERIC: "mpi.init"() : () -> ()
  mpi.init
  // CHECK: %{{.*}} = mpi.init : !mpi.retval
  // GENERIC: "mpi.init"() : () -> !mpi.retval
  %started = mpi.init : !mpi.retval
  // CHECK: %{{.*}} = mpi.finalize : !mpi.retval
  // GENERIC: "mpi.finalize"() : () -> !mpi.retval
  %stopped = mpi.finalize : !mpi.retval
  // CHECK: mpi.finalize{{$}}
  // GENERIC: "mpi.finalize"() : () -> ()
  mpi.finalize
  return
}

// -----

// CHECK-LABEL: func.func @communicators
// GENERIC-LABEL: sym_name = "communicators"
func.func @communicators(%color: i32, %key: i32) -> (i32, i32, !mpi.comm) {
  // CHECK: %[[W:.*]] = mpi.comm_world : !mpi.comm
  // GENERIC: "mpi.comm_world"() : () -> !mpi.comm
  %world = mpi.comm_world : !mpi.comm
  // CHECK: %{{.*}} = mpi.comm_rank(%[[W]]) : i32
  // GENERIC: "mpi.comm_rank"(%{{.*}}) : (!mpi.comm) -> i32
  %rank = mpi.comm_rank(%world) : i32
  // CHECK: %{{.*}}, %{{.*}} = mpi.comm_rank(%[[W]]) : !mpi.retval, i32
  // GENERIC: "mpi.comm_rank"(%{{.*}}) : (!mpi.comm) -> (!mpi.retval, i32)
  %rank_err, %rank2 = mpi.comm_rank(%world) : !mpi.retval, i32
  // CHECK: %{{.*}} = mpi.comm_size(%[[W]]) : i32
  // GENERIC: "mpi.comm_size"(%{{.*}}) : (!mpi.comm) -> i32
  %size = mpi.comm_size(%world) : i32
  // CHECK: %{{.*}}, %{{.*}} = mpi.comm_size(%[[W]]) : !mpi.retval, i32
  // GENERIC: "mpi.comm_size"(%{{.*}}) : (!mpi.comm) -> (!mpi.retval, i32)
  %size_err, %size2 = mpi.comm_size(%world) : !mpi.retval, i32
  // CHECK: %[[SUB:.*]] = mpi.comm_split(%[[W]], %{{.*}}, %{{.*}}) : !mpi.comm
  // GENERIC: "mpi.comm_split"(%{{.*}}, %{{.*}}, %{{.*}}) : (!mpi.comm, i32, i32) -> !mpi.comm
  %sub = mpi.comm_split(%world, %color, %key) : !mpi.comm
  // CHECK: %{{.*}}, %{{.*}} = mpi.comm_split(%[[SUB]], %{{.*}}, %{{.*}}) : !mpi.retval, !mpi.comm
  // GENERIC: "mpi.comm_split"(%{{.*}}, %{{.*}}, %{{.*}}) : (!mpi.comm, i32, i32) -> (!mpi.retval, !mpi.comm)
  %split_err, %subsub = mpi.comm_split(%sub, %key, %color) : !mpi.retval, !mpi.comm
  return %rank, %size2, %subsub : i32, i32, !mpi.comm
}

// -----

// CHECK-LABEL: func.func @blocking_point_to_point
// GENERIC-LABEL: sym_name = "blocking_point_to_point"
func.func @blocking_point_to_point(%buf: memref<8x3xf64>, %dyn: memref<?xi16>,
    %view: memref<4x?xf32, strided<[?, 1], offset: ?>>, %scalar: memref<i8>,
    %tag: i32, %peer: i32, %comm: !mpi.comm) {
  // CHECK: mpi.send(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : memref<8x3xf64>, i32, i32{{$}}
  // GENERIC: "mpi.send"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (memref<8x3xf64>, i32, i32, !mpi.comm) -> ()
  mpi.send(%buf, %tag, %peer, %comm) : memref<8x3xf64>, i32, i32
  // CHECK: %{{.*}} = mpi.send(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : memref<?xi16>, i32, i32 -> !mpi.retval
  // GENERIC: "mpi.send"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (memref<?xi16>, i32, i32, !mpi.comm) -> !mpi.retval
  %sent = mpi.send(%dyn, %tag, %peer, %comm) : memref<?xi16>, i32, i32 -> !mpi.retval
  // CHECK: mpi.send(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : memref<i8>, i32, i32{{$}}
  mpi.send(%scalar, %tag, %peer, %comm) : memref<i8>, i32, i32
  // CHECK: mpi.recv(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : memref<4x?xf32, strided<[?, 1], offset: ?>>, i32, i32{{$}}
  // GENERIC: "mpi.recv"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (memref<4x?xf32, strided<[?, 1], offset: ?>>, i32, i32, !mpi.comm) -> ()
  mpi.recv(%view, %tag, %peer, %comm) : memref<4x?xf32, strided<[?, 1], offset: ?>>, i32, i32
  // CHECK: %{{.*}} = mpi.recv(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : memref<8x3xf64>, i32, i32 -> !mpi.retval
  // GENERIC: "mpi.recv"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (memref<8x3xf64>, i32, i32, !mpi.comm) -> !mpi.retval
  %received = mpi.recv(%buf, %tag, %peer, %comm) : memref<8x3xf64>, i32, i32 -> !mpi.retval
  return
}

// -----

// CHECK-LABEL: func.func @nonblocking_point_to_point
// GENERIC-LABEL: sym_name = "nonblocking_point_to_point"
func.func @nonblocking_point_to_point(%buf: memref<16xbf16>, %tag: i32, %peer: i32,
    %comm: !mpi.comm) -> !mpi.retval {
  // CHECK: %[[R1:.*]] = mpi.isend(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : memref<16xbf16>, i32, i32 -> !mpi.request
  // GENERIC: "mpi.isend"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (memref<16xbf16>, i32, i32, !mpi.comm) -> !mpi.request
  %req1 = mpi.isend(%buf, %tag, %peer, %comm) : memref<16xbf16>, i32, i32 -> !mpi.request
  // CHECK: %{{.*}}, %[[R2:.*]] = mpi.isend(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : memref<16xbf16>, i32, i32 -> !mpi.retval, !mpi.request
  // GENERIC: "mpi.isend"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (memref<16xbf16>, i32, i32, !mpi.comm) -> (!mpi.retval, !mpi.request)
  %e2, %req2 = mpi.isend(%buf, %tag, %peer, %comm) : memref<16xbf16>, i32, i32 -> !mpi.retval, !mpi.request
  // CHECK: %[[R3:.*]] = mpi.irecv(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : memref<16xbf16>, i32, i32 -> !mpi.request
  // GENERIC: "mpi.irecv"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (memref<16xbf16>, i32, i32, !mpi.comm) -> !mpi.request
  %req3 = mpi.irecv(%buf, %tag, %peer, %comm) : memref<16xbf16>, i32, i32 -> !mpi.request
  // CHECK: %{{.*}}, %[[R4:.*]] = mpi.irecv(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : memref<16xbf16>, i32, i32 -> !mpi.retval, !mpi.request
  // GENERIC: "mpi.irecv"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (memref<16xbf16>, i32, i32, !mpi.comm) -> (!mpi.retval, !mpi.request)
  %e4, %req4 = mpi.irecv(%buf, %tag, %peer, %comm) : memref<16xbf16>, i32, i32 -> !mpi.retval, !mpi.request
  // CHECK: mpi.wait(%[[R1]]) : !mpi.request{{$}}
  // GENERIC: "mpi.wait"(%{{.*}}) : (!mpi.request) -> ()
  mpi.wait(%req1) : !mpi.request
  // CHECK: %{{.*}} = mpi.wait(%[[R2]]) : !mpi.request -> !mpi.retval
  // GENERIC: "mpi.wait"(%{{.*}}) : (!mpi.request) -> !mpi.retval
  %w2 = mpi.wait(%req2) : !mpi.request -> !mpi.retval
  // CHECK: mpi.wait(%[[R3]]) : !mpi.request{{$}}
  mpi.wait(%req3) : !mpi.request
  // CHECK: mpi.wait(%[[R4]]) : !mpi.request{{$}}
  mpi.wait(%req4) : !mpi.request
  return %w2 : !mpi.retval
}

// -----

// CHECK-LABEL: func.func @barrier
// GENERIC-LABEL: sym_name = "barrier"
func.func @barrier(%comm: !mpi.comm) -> !mpi.retval {
  // CHECK: mpi.barrier(%{{.*}}){{$}}
  // GENERIC: "mpi.barrier"(%{{.*}}) : (!mpi.comm) -> ()
  mpi.barrier(%comm)
  // CHECK: %{{.*}} = mpi.barrier(%{{.*}}) -> !mpi.retval
  // GENERIC: "mpi.barrier"(%{{.*}}) : (!mpi.comm) -> !mpi.retval
  %done = mpi.barrier(%comm) -> !mpi.retval
  return %done : !mpi.retval
}

// -----

// Every predefined reduction, as keyword, as string (MLIR accepts both) and in
// generic form; the generic form stores the enum's i32 code.

// CHECK-LABEL: func.func @allreduce
// GENERIC-LABEL: sym_name = "allreduce"
func.func @allreduce(%in: memref<32xf32>, %out: memref<32xf32>, %ints: memref<2x2xi64>,
    %comm: !mpi.comm) -> !mpi.retval {
  // CHECK: mpi.allreduce(%{{.*}}, %{{.*}}, MPI_OP_NULL, %{{.*}}) : memref<32xf32>, memref<32xf32>{{$}}
  // GENERIC: "mpi.allreduce"(%{{.*}}, %{{.*}}, %{{.*}}) <{op = 0 : i32}> : (memref<32xf32>, memref<32xf32>, !mpi.comm) -> ()
  mpi.allreduce(%in, %out, MPI_OP_NULL, %comm) : memref<32xf32>, memref<32xf32>
  // CHECK: mpi.allreduce(%{{.*}}, %{{.*}}, MPI_MAX, %{{.*}})
  // GENERIC: <{op = 1 : i32}>
  mpi.allreduce(%in, %out, MPI_MAX, %comm) : memref<32xf32>, memref<32xf32>
  // CHECK: mpi.allreduce(%{{.*}}, %{{.*}}, MPI_MIN, %{{.*}})
  // GENERIC: <{op = 2 : i32}>
  mpi.allreduce(%in, %out, "MPI_MIN", %comm) : memref<32xf32>, memref<32xf32>
  // CHECK: mpi.allreduce(%{{.*}}, %{{.*}}, MPI_SUM, %{{.*}})
  // GENERIC: <{op = 3 : i32}>
  mpi.allreduce(%in, %out, MPI_SUM, %comm) : memref<32xf32>, memref<32xf32>
  // CHECK: mpi.allreduce(%{{.*}}, %{{.*}}, MPI_PROD, %{{.*}})
  // GENERIC: <{op = 4 : i32}>
  mpi.allreduce(%in, %out, MPI_PROD, %comm) : memref<32xf32>, memref<32xf32>
  // CHECK: mpi.allreduce(%{{.*}}, %{{.*}}, MPI_LAND, %{{.*}})
  // GENERIC: <{op = 5 : i32}>
  mpi.allreduce(%ints, %ints, MPI_LAND, %comm) : memref<2x2xi64>, memref<2x2xi64>
  // CHECK: mpi.allreduce(%{{.*}}, %{{.*}}, MPI_BAND, %{{.*}})
  // GENERIC: <{op = 6 : i32}>
  mpi.allreduce(%ints, %ints, MPI_BAND, %comm) : memref<2x2xi64>, memref<2x2xi64>
  // CHECK: mpi.allreduce(%{{.*}}, %{{.*}}, MPI_LOR, %{{.*}})
  // GENERIC: <{op = 7 : i32}>
  mpi.allreduce(%ints, %ints, MPI_LOR, %comm) : memref<2x2xi64>, memref<2x2xi64>
  // CHECK: mpi.allreduce(%{{.*}}, %{{.*}}, MPI_BOR, %{{.*}})
  // GENERIC: <{op = 8 : i32}>
  mpi.allreduce(%ints, %ints, MPI_BOR, %comm) : memref<2x2xi64>, memref<2x2xi64>
  // CHECK: mpi.allreduce(%{{.*}}, %{{.*}}, MPI_LXOR, %{{.*}})
  // GENERIC: <{op = 9 : i32}>
  mpi.allreduce(%ints, %ints, MPI_LXOR, %comm) : memref<2x2xi64>, memref<2x2xi64>
  // CHECK: mpi.allreduce(%{{.*}}, %{{.*}}, MPI_BXOR, %{{.*}})
  // GENERIC: <{op = 10 : i32}>
  mpi.allreduce(%ints, %ints, MPI_BXOR, %comm) : memref<2x2xi64>, memref<2x2xi64>
  // CHECK: mpi.allreduce(%{{.*}}, %{{.*}}, MPI_MINLOC, %{{.*}})
  // GENERIC: <{op = 11 : i32}>
  mpi.allreduce(%in, %out, MPI_MINLOC, %comm) : memref<32xf32>, memref<32xf32>
  // CHECK: mpi.allreduce(%{{.*}}, %{{.*}}, MPI_MAXLOC, %{{.*}})
  // GENERIC: <{op = 12 : i32}>
  mpi.allreduce(%in, %out, MPI_MAXLOC, %comm) : memref<32xf32>, memref<32xf32>
  // CHECK: mpi.allreduce(%{{.*}}, %{{.*}}, MPI_REPLACE, %{{.*}})
  // GENERIC: <{op = 13 : i32}>
  mpi.allreduce(%in, %out, MPI_REPLACE, %comm) : memref<32xf32>, memref<32xf32>
  // CHECK: %{{.*}} = mpi.allreduce(%{{.*}}, %{{.*}}, MPI_SUM, %{{.*}}) : memref<32xf32>, memref<32xf32> -> !mpi.retval
  // GENERIC: "mpi.allreduce"(%{{.*}}, %{{.*}}, %{{.*}}) <{op = 3 : i32}> : (memref<32xf32>, memref<32xf32>, !mpi.comm) -> !mpi.retval
  %err = mpi.allreduce(%in, %out, MPI_SUM, %comm) : memref<32xf32>, memref<32xf32> -> !mpi.retval
  return %err : !mpi.retval
}

// -----

// Generic syntax in the input reads back as custom syntax.

// CHECK-LABEL: func.func @generic_input
func.func @generic_input(%buf: memref<4xi32>, %comm: !mpi.comm) {
  // CHECK: mpi.allreduce(%{{.*}}, %{{.*}}, MPI_PROD, %{{.*}}) : memref<4xi32>, memref<4xi32>{{$}}
  "mpi.allreduce"(%buf, %buf, %comm) <{op = 4 : i32}> : (memref<4xi32>, memref<4xi32>, !mpi.comm) -> ()
  // CHECK: %{{.*}}, %{{.*}} = mpi.comm_rank(%{{.*}}) : !mpi.retval, i32
  %r:2 = "mpi.comm_rank"(%comm) : (!mpi.comm) -> (!mpi.retval, i32)
  // CHECK: mpi.retval_check %{{.*}} = <MPI_ERR_RANK> : i1
  %ok = "mpi.retval_check"(%r#0) <{errclass = #mpi.errclass<MPI_ERR_RANK>}> : (!mpi.retval) -> i1
  return
}

// -----

// CHECK-LABEL: func.func @error_handling
// GENERIC-LABEL: sym_name = "error_handling"
func.func @error_handling(%rv: !mpi.retval) -> (i1, i1, i1, i1, !mpi.retval) {
  // CHECK: %{{.*}} = mpi.retval_check %{{.*}} = <MPI_SUCCESS> : i1
  // GENERIC: "mpi.retval_check"(%{{.*}}) <{errclass = #mpi.errclass<MPI_SUCCESS>}> : (!mpi.retval) -> i1
  %ok = mpi.retval_check %rv = <MPI_SUCCESS> : i1
  // CHECK: mpi.retval_check %{{.*}} = <MPI_ERR_COMM> : i1
  // GENERIC: <{errclass = #mpi.errclass<MPI_ERR_COMM>}>
  %bad_comm = mpi.retval_check %rv = <MPI_ERR_COMM> : i1
  // CHECK: mpi.retval_check %{{.*}} = <MPI_ERR_IN_STATUS> : i1
  // GENERIC: <{errclass = #mpi.errclass<MPI_ERR_IN_STATUS>}>
  %in_status = mpi.retval_check %rv = <MPI_ERR_IN_STATUS> : i1
  // CHECK: mpi.retval_check %{{.*}} = <MPI_ERR_LASTCODE> : i1
  // GENERIC: <{errclass = #mpi.errclass<MPI_ERR_LASTCODE>}>
  %last = mpi.retval_check %rv = <MPI_ERR_LASTCODE> : i1
  // CHECK: %{{.*}} = mpi.error_class %{{.*}} : !mpi.retval
  // GENERIC: "mpi.error_class"(%{{.*}}) : (!mpi.retval) -> !mpi.retval
  %class = mpi.error_class %rv : !mpi.retval
  return %ok, %bad_comm, %in_status, %last, %class : i1, i1, i1, i1, !mpi.retval
}

// -----

// Discardable attributes print in the attr-dict, after the operands.

// CHECK-LABEL: func.func @attr_dicts
func.func @attr_dicts(%buf: memref<2xf32>, %tag: i32, %comm: !mpi.comm) {
  // CHECK: mpi.init {note = "first"}{{$}}
  mpi.init {note = "first"}
  // CHECK: mpi.comm_world {note = 1 : i64} : !mpi.comm
  %w = mpi.comm_world {note = 1} : !mpi.comm
  // CHECK: mpi.send(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {note} : memref<2xf32>, i32, i32
  mpi.send(%buf, %tag, %tag, %comm) {note} : memref<2xf32>, i32, i32
  // CHECK: mpi.allreduce(%{{.*}}, %{{.*}}, MPI_MAX, %{{.*}}) {note = 2 : i32} : memref<2xf32>, memref<2xf32>
  mpi.allreduce(%buf, %buf, MPI_MAX, %comm) {note = 2 : i32} : memref<2xf32>, memref<2xf32>
  // CHECK: mpi.barrier(%{{.*}}) {note = "b"}{{$}}
  mpi.barrier(%comm) {note = "b"}
  return
}

// -----

// ORACLE-SKIP: mpi.allgather and mpi.reduce_scatter_block are newer than mlir-opt 22.1.8

// CHECK-LABEL: func.func @trunk_collectives
// GENERIC-LABEL: sym_name = "trunk_collectives"
func.func @trunk_collectives(%send: memref<4xf32>, %gathered: memref<16xf32>,
    %scattered: memref<1xf32>, %comm: !mpi.comm) -> (!mpi.retval, !mpi.retval) {
  // CHECK: mpi.allgather(%{{.*}}, %{{.*}}, %{{.*}}) : memref<4xf32>, memref<16xf32>{{$}}
  // GENERIC: "mpi.allgather"(%{{.*}}, %{{.*}}, %{{.*}}) : (memref<4xf32>, memref<16xf32>, !mpi.comm) -> ()
  mpi.allgather(%send, %gathered, %comm) : memref<4xf32>, memref<16xf32>
  // CHECK: %{{.*}} = mpi.allgather(%{{.*}}, %{{.*}}, %{{.*}}) : memref<4xf32>, memref<16xf32> -> !mpi.retval
  // GENERIC: "mpi.allgather"(%{{.*}}, %{{.*}}, %{{.*}}) : (memref<4xf32>, memref<16xf32>, !mpi.comm) -> !mpi.retval
  %g = mpi.allgather(%send, %gathered, %comm) : memref<4xf32>, memref<16xf32> -> !mpi.retval
  // CHECK: mpi.reduce_scatter_block(%{{.*}}, %{{.*}}, MPI_SUM, %{{.*}}) : memref<4xf32>, memref<1xf32>{{$}}
  // GENERIC: "mpi.reduce_scatter_block"(%{{.*}}, %{{.*}}, %{{.*}}) <{op = 3 : i32}> : (memref<4xf32>, memref<1xf32>, !mpi.comm) -> ()
  mpi.reduce_scatter_block(%send, %scattered, MPI_SUM, %comm) : memref<4xf32>, memref<1xf32>
  // CHECK: %{{.*}} = mpi.reduce_scatter_block(%{{.*}}, %{{.*}}, MPI_MAX, %{{.*}}) : memref<4xf32>, memref<1xf32> -> !mpi.retval
  // GENERIC: "mpi.reduce_scatter_block"(%{{.*}}, %{{.*}}, %{{.*}}) <{op = 1 : i32}> : (memref<4xf32>, memref<1xf32>, !mpi.comm) -> !mpi.retval
  %r = mpi.reduce_scatter_block(%send, %scattered, "MPI_MAX", %comm) : memref<4xf32>, memref<1xf32> -> !mpi.retval
  return %g, %r : !mpi.retval, !mpi.retval
}

// -----

// The types outside any op, and the error class attribute in a dictionary.

// CHECK-LABEL: func.func private @types
// CHECK-SAME: (!mpi.comm, !mpi.request, !mpi.retval) -> !mpi.status
// CHECK-SAME: attributes {class = #mpi.errclass<MPI_ERR_TRUNCATE>}
func.func private @types(!mpi.comm, !mpi.request, !mpi.retval) -> !mpi.status attributes {class = #mpi.errclass<MPI_ERR_TRUNCATE>}

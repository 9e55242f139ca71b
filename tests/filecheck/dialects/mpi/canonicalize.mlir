// RUN: shardc-opt %s --split-input-file --canonicalize | filecheck %s

// A dynamically shaped buffer cast from a static one: the ops take the static one.

// CHECK-LABEL: func.func @fold_cast
// CHECK-SAME: (%[[BUF:.*]]: memref<8x2xf32>, %[[TAG:.*]]: i32, %[[COMM:.*]]: !mpi.comm)
func.func @fold_cast(%buf: memref<8x2xf32>, %tag: i32, %comm: !mpi.comm)
    -> (!mpi.retval, !mpi.retval, !mpi.retval) {
  // CHECK-NOT: memref.cast
  %dyn = memref.cast %buf : memref<8x2xf32> to memref<?x?xf32>
  // CHECK: mpi.send(%[[BUF]], %[[TAG]], %[[TAG]], %[[COMM]]) : memref<8x2xf32>, i32, i32
  mpi.send(%dyn, %tag, %tag, %comm) : memref<?x?xf32>, i32, i32
  // CHECK: %[[RV:.*]] = mpi.recv(%[[BUF]], %[[TAG]], %[[TAG]], %[[COMM]]) : memref<8x2xf32>, i32, i32 -> !mpi.retval
  %rv = mpi.recv(%dyn, %tag, %tag, %comm) : memref<?x?xf32>, i32, i32 -> !mpi.retval
  // CHECK: %[[R1:.*]] = mpi.isend(%[[BUF]], %[[TAG]], %[[TAG]], %[[COMM]]) : memref<8x2xf32>, i32, i32 -> !mpi.request
  %r1 = mpi.isend(%dyn, %tag, %tag, %comm) : memref<?x?xf32>, i32, i32 -> !mpi.request
  // CHECK: %{{.*}}, %[[R2:.*]] = mpi.irecv(%[[BUF]], %[[TAG]], %[[TAG]], %[[COMM]]) : memref<8x2xf32>, i32, i32 -> !mpi.retval, !mpi.request
  %e, %r2 = mpi.irecv(%dyn, %tag, %tag, %comm) : memref<?x?xf32>, i32, i32 -> !mpi.retval, !mpi.request
  // CHECK: %[[W1:.*]] = mpi.wait(%[[R1]]) : !mpi.request -> !mpi.retval
  %w1 = mpi.wait(%r1) : !mpi.request -> !mpi.retval
  // CHECK: %[[W2:.*]] = mpi.wait(%[[R2]]) : !mpi.request -> !mpi.retval
  %w2 = mpi.wait(%r2) : !mpi.request -> !mpi.retval
  // CHECK: return %[[RV]], %[[W1]], %[[W2]]
  return %rv, %w1, %w2 : !mpi.retval, !mpi.retval, !mpi.retval
}

// -----

// No fold: the source is not static, the buffer is already static, or no cast.

// CHECK-LABEL: func.func @keep_cast
// CHECK-SAME: (%[[PART:.*]]: memref<4x?xf32>, %[[DYN:.*]]: memref<?xi8>, %[[TAG:.*]]: i32, %[[COMM:.*]]: !mpi.comm)
func.func @keep_cast(%part: memref<4x?xf32>, %dyn: memref<?xi8>, %tag: i32, %comm: !mpi.comm) {
  // CHECK: %[[C1:.*]] = memref.cast %[[PART]] : memref<4x?xf32> to memref<?x?xf32>
  %c1 = memref.cast %part : memref<4x?xf32> to memref<?x?xf32>
  // CHECK: mpi.send(%[[C1]], %[[TAG]], %[[TAG]], %[[COMM]]) : memref<?x?xf32>, i32, i32
  mpi.send(%c1, %tag, %tag, %comm) : memref<?x?xf32>, i32, i32
  // CHECK: %[[C2:.*]] = memref.cast %[[DYN]] : memref<?xi8> to memref<16xi8>
  %c2 = memref.cast %dyn : memref<?xi8> to memref<16xi8>
  // CHECK: mpi.recv(%[[C2]], %[[TAG]], %[[TAG]], %[[COMM]]) : memref<16xi8>, i32, i32
  mpi.recv(%c2, %tag, %tag, %comm) : memref<16xi8>, i32, i32
  // CHECK: mpi.send(%[[DYN]], %[[TAG]], %[[TAG]], %[[COMM]]) : memref<?xi8>, i32, i32
  mpi.send(%dyn, %tag, %tag, %comm) : memref<?xi8>, i32, i32
  return
}

// -----

// ORACLE-SKIP: mlir-opt 22.1.8 folds comm_rank to an index constant (a type error) and has no comm_size fold

// The world rank and size known through DLTI become i32 constants.

// CHECK: module attributes {mpi.dlti = #dlti.map<"MPI:comm_world_rank" = 5 : i64, "MPI:comm_world_size" = 12 : i64>}
module attributes {mpi.dlti = #dlti.map<"MPI:comm_world_rank" = 5, "MPI:comm_world_size" = 12>} {
  // CHECK-LABEL: func.func @world_rank_and_size
  func.func @world_rank_and_size() -> (i32, i32, i32) {
    // CHECK-NOT: mpi.comm_world
    // CHECK-DAG: %[[RANK:.*]] = arith.constant 5 : i32
    // CHECK-DAG: %[[SIZE:.*]] = arith.constant 12 : i32
    // CHECK-NOT: mpi.comm_
    %world = mpi.comm_world : !mpi.comm
    %rank = mpi.comm_rank(%world) : i32
    %size = mpi.comm_size(%world) : i32
    // An unused !mpi.retval does not block the fold.
    %err, %size2 = mpi.comm_size(%world) : !mpi.retval, i32
    // CHECK: return %[[RANK]], %[[SIZE]], %{{.*}} : i32, i32, i32
    return %rank, %size, %size2 : i32, i32, i32
  }
}

// -----

// ORACLE-SKIP: mlir-opt 22.1.8 asserts on the used !mpi.retval (upstream replaces it with itself)

// A used !mpi.retval keeps the op.

module attributes {mpi.dlti = #dlti.map<"MPI:comm_world_rank" = 5>} {
  // CHECK-LABEL: func.func @used_retval
  func.func @used_retval() -> (i32, !mpi.retval) {
    // CHECK: %[[W:.*]] = mpi.comm_world : !mpi.comm
    %world = mpi.comm_world : !mpi.comm
    // CHECK: %[[E:.*]], %[[R:.*]] = mpi.comm_rank(%[[W]]) : !mpi.retval, i32
    %err, %rank = mpi.comm_rank(%world) : !mpi.retval, i32
    // CHECK: return %[[R]], %[[E]]
    return %rank, %err : i32, !mpi.retval
  }
}

// -----

// No fold: the closest DLTI map lacks the key (an outer map is not consulted), the
// communicator is not the world, or no DLTI at all.

module attributes {mpi.dlti = #dlti.map<"MPI:comm_world_rank" = 5, "MPI:comm_world_size" = 12>} {
  // CHECK-LABEL: func.func @shadowed
  func.func @shadowed() -> (i32, i32) attributes {other.dlti = #dlti.map<"unrelated" = 1>} {
    // CHECK: %[[W:.*]] = mpi.comm_world : !mpi.comm
    %world = mpi.comm_world : !mpi.comm
    // CHECK: mpi.comm_rank(%[[W]]) : i32
    %rank = mpi.comm_rank(%world) : i32
    // CHECK: mpi.comm_size(%[[W]]) : i32
    %size = mpi.comm_size(%world) : i32
    return %rank, %size : i32, i32
  }
  // CHECK-LABEL: func.func @sub_communicator
  func.func @sub_communicator(%color: i32) -> i32 {
    %world = mpi.comm_world : !mpi.comm
    // CHECK: %[[SUB:.*]] = mpi.comm_split
    %sub = mpi.comm_split(%world, %color, %color) : !mpi.comm
    // CHECK: mpi.comm_rank(%[[SUB]]) : i32
    %rank = mpi.comm_rank(%sub) : i32
    return %rank : i32
  }
}

// -----

// CHECK-LABEL: func.func @no_dlti
func.func @no_dlti() -> i32 {
  // CHECK: %[[W:.*]] = mpi.comm_world : !mpi.comm
  %world = mpi.comm_world : !mpi.comm
  // CHECK: mpi.comm_rank(%[[W]]) : i32
  %rank = mpi.comm_rank(%world) : i32
  return %rank : i32
}

// -----

// Unused queries are dead code (comm_world, comm_rank and comm_size have no memory
// effects); ops with effects stay.

// CHECK-LABEL: func.func @dead_queries
func.func @dead_queries(%buf: memref<4xf32>, %tag: i32) {
  // CHECK-NEXT: %[[W:.*]] = mpi.comm_world : !mpi.comm
  // CHECK-NEXT: %{{.*}} = mpi.init : !mpi.retval
  // CHECK-NEXT: mpi.send(%{{.*}}, %{{.*}}, %{{.*}}, %[[W]]) : memref<4xf32>, i32, i32
  // CHECK-NEXT: mpi.barrier(%[[W]])
  // CHECK-NEXT: mpi.finalize
  // CHECK-NEXT: return
  %world = mpi.comm_world : !mpi.comm
  %unused = mpi.comm_world : !mpi.comm
  %err = mpi.init : !mpi.retval
  %rank = mpi.comm_rank(%world) : i32
  %size = mpi.comm_size(%world) : i32
  mpi.send(%buf, %tag, %tag, %world) : memref<4xf32>, i32, i32
  mpi.barrier(%world)
  mpi.finalize
  return
}

// -----

// ORACLE-SKIP: trunk declares retval_check and error_class free of memory effects; 22.1.8 does not

// An unused wait stays: it completes its request (trunk's newest ODS marks it free of
// effects, which would erase it; we keep 22.1.8's behaviour). Unused checks go.
// CHECK-LABEL: func.func @dead_checks
func.func @dead_checks(%rv: !mpi.retval, %req: !mpi.request) {
  // CHECK-NEXT: mpi.wait(%{{.*}}) : !mpi.request
  // CHECK-NEXT: return
  %ok = mpi.retval_check %rv = <MPI_SUCCESS> : i1
  %class = mpi.error_class %rv : !mpi.retval
  mpi.wait(%req) : !mpi.request
  return
}

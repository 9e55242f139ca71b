// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | shardc-opt --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file | filecheck %s

// The MPI rank of a module, as the shard->MPI lowering reads it.

// CHECK: module attributes {dlti.map = #dlti.map<"MPI:comm_world-rank" = 3 : i32>}
// CHECK-LABEL: func.func @rank_three
module attributes {dlti.map = #dlti.map<"MPI:comm_world-rank" = 3 : i32>} {
  func.func @rank_three() {
    return
  }
}

// -----

// Untyped integers become i64; several entries keep their order.

// CHECK: module attributes {dlti.map = #dlti.map<"MPI:comm_world-size" = 8 : i64, "MPI:comm_world-rank" = 5 : i32>}
module attributes {dlti.map = #dlti.map<"MPI:comm_world-size" = 8, "MPI:comm_world-rank" = 5 : i32>} {
  func.func @a() {
    return
  }
}

// -----

// `#dlti.dl_entry<key, value>` entries are accepted and printed as `key = value`.

// CHECK: module attributes {dlti.map = #dlti.map<"MPI:comm_world-rank" = 0 : i32, "note" = "x">}
module attributes {dlti.map = #dlti.map<#dlti.dl_entry<"MPI:comm_world-rank", 0 : i32>, #dlti.dl_entry<"note", "x">>} {
  func.func @b() {
    return
  }
}

// -----

// Type keys, nested maps, an empty map and a data layout spec.

// CHECK: module attributes {dlti.dl_spec = #dlti.dl_spec<i16 = dense<16> : vector<2xi64>>, dlti.map = #dlti.map<"outer" = #dlti.map<"inner" = 1 : i64>, f32 = 4 : i64>, test.empty = #dlti.map<>}
module attributes {dlti.dl_spec = #dlti.dl_spec<i16 = dense<16> : vector<2xi64>>, dlti.map = #dlti.map<"outer" = #dlti.map<"inner" = 1>, f32 = 4>, test.empty = #dlti.map<>} {
  func.func @c() {
    return
  }
}

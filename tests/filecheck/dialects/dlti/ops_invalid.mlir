// RUN: shardc-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{repeated DLTI key: "MPI:comm_world-rank"}}
module attributes {dlti.map = #dlti.map<"MPI:comm_world-rank" = 1 : i32, "MPI:comm_world-rank" = 2 : i32>} {
  func.func @a() {
    return
  }
}

// -----

// expected-error @+1 {{empty string as DLTI key is not allowed}}
module attributes {dlti.map = #dlti.map<"" = 1 : i32>} {
  func.func @b() {
    return
  }
}

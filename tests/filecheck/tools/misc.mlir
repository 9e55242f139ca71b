// RUN: shardc-opt --version | filecheck %s --check-prefix=VERSION
// RUN: shardc-opt -h | filecheck %s --check-prefix=HELP
// RUN: shardc-opt %s -cse -o %t && filecheck %s --input-file=%t --check-prefix=OUT
// RUN: shardc-opt < %s | filecheck %s --check-prefix=OUT
// RUN: shardc-opt - --verify-each=false --mlir-disable-threading < %s | filecheck %s --check-prefix=OUT
// RUN: not shardc-opt %s --no-implicit-module 2>&1 | filecheck %s --check-prefix=NOIMPLICIT
// RUN: not shardc-opt %s %s 2>&1 | filecheck %s --check-prefix=TWO

// VERSION: shardc-opt {{.*}}xdsl
// HELP: USAGE: shardc-opt [options] <input file>
// HELP: --pass-pipeline
// HELP: --inline
// HELP-NEXT: default-pipeline=<str> (default: canonicalize)

// OUT: func.func @f
func.func @f() {
  return
}

// NOIMPLICIT: error:
// TWO: shardc-opt: Too many positional arguments specified!

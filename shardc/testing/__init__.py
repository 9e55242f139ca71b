"""Helpers for tests and benchmarks (the mlir-opt oracle, output normalisation)."""

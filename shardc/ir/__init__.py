"""IR utilities shared by the tools: mlir-opt style printing, locations, diagnostics."""

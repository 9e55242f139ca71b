"""shardc: a sharding compiler and SPMD runtime for MLIR's shard dialect."""

__version__ = "0.1.0"

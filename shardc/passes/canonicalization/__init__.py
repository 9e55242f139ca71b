"""MLIR's folders and canonicalization patterns for foreign ops that xDSL's dialects lack,
one module per dialect; importing this package registers them in
`shardc.passes.fold_registry`."""

from shardc.passes.canonicalization import affine, arith, linalg, scf, shard, tensor, tosa

__all__ = ["affine", "arith", "linalg", "scf", "shard", "tensor", "tosa"]

"""The passes section of `shardc-opt --help`, kept as text so that help loads no pass.

`tests/unit/tools/test_opt_startup.py` checks it against the pass registry (every pass
loaded, its docstring and typed options read); after changing a pass's summary line or
options, regenerate it with

    python -m shardc.tools.help_table --write
"""

PASS_HELP = """\
  --auto-sharding                  Choose a sharding for every tensor value by an integer program over the cost model.
      memory-budget=<str> (default: )
      explain=<bool> (default: false)
      rates=<str> (default: cached)
  --canonicalize                   Canonicalize operations: folding, canonicalization patterns, constant uniquing and
      top-down=<bool> (default: true)
      region-simplify=<disabled|normal|aggressive> (default: normal)
      max-iterations=<int> (default: 10)
      max-num-rewrites=<int> (default: -1)
      test-convergence=<bool> (default: false)
      disable-patterns=<list of str> (default: )
      enable-patterns=<list of str> (default: )
  --convert-shard-to-mpi           Lower the shard dialect to mpi (MLIR's `convert-shard-to-mpi`).
  --cse                            Eliminate common sub-expressions, along the dominator tree in CFG regions.
  --dce
  --expand-shapes-before-pads      Expand a pad's source instead of the padded tensor, where the padded dimensions
  --inline                         Inline calls to single-block functions of the module.
      default-pipeline=<str> (default: canonicalize)
      max-iterations=<int> (default: 4)
  --scatter-windows                Scatters into non-overlapping pooling windows as elementwise generics.
  --shard-partition                Partition every annotated func.func of the module into SPMD form.
  --shard-simplify                 Applies the Shard simplification patterns (all-reduce endomorphisms, all_slice of
  --shard-to-mpi-pipeline          Annotated global program to mpi: sharding-propagation, shard-partition,
      traversal=<forward|backward|forward-backward|backward-forward> (default: backward-forward)
      keep-shardings=<bool> (default: true)
  --sharding-propagation           Propagate shard.shard annotations through every func.func of the module.
      traversal=<forward|backward|forward-backward|backward-forward> (default: backward-forward)
      explain=<bool> (default: false)
      complete=<bool> (default: true)
  --split-shared-inits             Give each user of a shared `tensor.empty` (or a zero fill of one) its own copy.
  --test-grid-all-slice-op-lowering Lowers `shard.all_slice` (and folds what the lowering leaves foldable).
  --test-grid-process-multi-index-op-lowering Lowers `shard.process_multi_index` to linear index, grid shape, delinearize.
  --test-grid-resharding-partition Emit the resharding of every annotated pair, as mlir-opt's test pass does.
  --test-grid-simplifications      All-reduce endomorphisms and grid_shape folding (upstream's older
  --test-single-fold               Folds every op exactly once, last op first, then erases unused constants: each
  --uncollapse-batch-matmuls       Rewrite batch matmuls over collapsed batch dimensions as one contraction over them.
"""


def _write() -> None:
    import re
    from pathlib import Path

    from shardc.passes import all_passes
    from shardc.tools.argv import registry_pass_help

    path = Path(__file__)
    text = path.read_text()
    body = registry_pass_help(all_passes()).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    new = re.sub(r'PASS_HELP = """\\\n.*?"""\n', lambda _: f'PASS_HELP = """\\\n{body}"""\n', text, count=1, flags=re.S)
    path.write_text(new)


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m shardc.tools.help_table --write")
    _write()

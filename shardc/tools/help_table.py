"""The passes section of `shardc-opt --help`, kept as text so that help loads no pass.

`tests/unit/tools/test_opt_startup.py` checks it against the pass registry (every pass
loaded, its docstring and typed options read); after changing a pass's summary line or
options, regenerate it with

    python -m shardc.tools.argv --write-help-table

(a table of text only: `shardc.tools.argv` reads it for --help and writes it from the
registry, so this module imports nothing).
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
  --forward-send-copies            Forward copies that only stage an MPI collective's send buffer (module docstring).
  --inline                         Inline calls to single-block functions of the module.
      default-pipeline=<str> (default: canonicalize)
      max-iterations=<int> (default: 4)
  --iota-operands-as-indices       Generic inputs holding their loop's positions (an arange) read as `linalg.index`.
  --mixed-precision                bf16 products with float32 everything else (the module docstring).
      compute=<bf16|f32> (default: bf16)
  --reduction-precision            Sum collectives over the data-parallel grid axes reduce bf16 copies (the module docstring).
      type=<bf16|f32> (default: bf16)
      grid-axes=<list of int> (default: )
  --scatter-by-position            Scatters whose first index column is each update's own position as elementwise generics.
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
  --torch-cleanup-pipeline         torch-mlir's linalg-on-tensors into a form that shards: uncollapse-batch-matmuls,
  --uncollapse-batch-matmuls       Rewrite batch matmuls over collapsed batch dimensions as one contraction over them.
"""

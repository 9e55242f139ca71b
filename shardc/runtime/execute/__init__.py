"""The every-step side of the runtime: what the generated code calls while it runs.
The Comm layer and its collectives (`comm`, `sharding`), the compiled module's callables
(`compiled`), the checks generated code passes before it runs (`code_check`), scalar and
dtype conversions (`dtypes`, `helpers`), the structured, windowed, horizontal and
overlapped run times, and the kernels under `kernels/` (BLAS, numba loop nests, each
dialect's run-time functions). Nothing here imports `shardc.runtime.codegen`: a
compile-cache hit loads this package alone, without the compiler."""

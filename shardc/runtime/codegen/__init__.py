"""The once side of the runtime: an MLIR module -> generated Python, done once per
program. Code generation (`compile`, `structured`, `window`), the rewrites it runs first
(elementwise and row fusion, horizontal groups, donation, the overlap schedule), the
per-dialect emitters (`kernels/`), the rules that keep IR text out of the generated code
(`codegen_safe`; the checks of the code itself are the run side's `code_check`) and the
compile cache with its per-rank parts (`cache`, `parts`). It may import
`shardc.runtime.execute`: the generated code binds only that side's functions, classes
and objects, never this package's (`cache` refuses to store anything else)."""

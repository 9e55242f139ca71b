"""Run-time halves of the per-dialect kernels: the functions and classes generated code
calls (BLAS, the numba loop nests and their on-disk cache, each dialect's `*_run`)."""

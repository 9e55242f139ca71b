"""PyTorch `nn.Module` -> linalg-on-tensors IR through torch-mlir.

The parameters become function arguments (after the module's own inputs, in
`named_parameters()` order), never baked constants, so a sharding plan can name them by
their fully qualified name (FQN). torch and torch-mlir are the optional `[torch]` extra;
importing this module without them raises a `MissingTorch` with the install line.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Sequence

INSTALL_HINT = 'pip install -e ".[torch]"  (torch==2.13.0 CPU and torch-mlir 20261001)'


class MissingTorch(ImportError):
    """torch or torch-mlir is not installed."""


def require_torch():
    """(torch, torch_mlir.fx), or MissingTorch naming the extra to install."""
    try:
        import torch
        from torch_mlir import fx
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise MissingTorch(f"the torch frontend needs torch and torch-mlir: {INSTALL_HINT} ({e})") from e
    return torch, fx


def decomposition_table() -> dict[Any, Any]:
    """torch-mlir's decomposition table, plus `aten.gelu` through torch's own
    decomposition: torch-mlir lowers `gelu(approximate="tanh")` (Gemma's and many
    models' activation) with sqrt(2/pi) taken as 0.7977240 (pi as 22/7) instead of
    0.7978846, off by 5e-5 at |x| = 4 and 2e-5 relative in the gradients it feeds."""
    import torch
    from torch._decomp import get_decompositions
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    return {**get_decomposition_table(), **get_decompositions([torch.ops.aten.gelu.default])}


@contextlib.contextmanager
def traced_as_export() -> Iterator[None]:
    """`torch.compiler.is_compiling()` and `is_exporting()` true for the duration, as
    torch.export makes them while it traces, for traces that do not go through
    torch.export (the training import's `make_fx`): a library then takes the paths it
    takes under torch.export, skipping its eager-only checks on tensor values
    (transformers' `padding_mask.all()`, which `make_fx` cannot trace)."""
    import torch

    try:
        from torch._export.utils import _compiling_state_context as exporting
    except ImportError:  # pragma: no cover - older torch: the flags the public predicates read
        exporting = None
    if exporting is not None:
        with exporting():
            yield
        return
    old = torch.compiler._is_compiling_flag, torch.compiler._is_exporting_flag  # pragma: no cover
    torch.compiler._is_compiling_flag = torch.compiler._is_exporting_flag = True  # pragma: no cover
    try:  # pragma: no cover
        yield
    finally:  # pragma: no cover
        torch.compiler._is_compiling_flag, torch.compiler._is_exporting_flag = old


@dataclass
class ExportedModule:
    """torch-mlir's output for one module: the MLIR text and what its arguments are."""

    text: str
    func_name: str
    input_names: list[str]
    param_names: list[str]
    result_names: list[str] = field(default_factory=list)
    """Where each result sits in the module's output (`logits`, `1`; `""` for a
    module that returns one tensor): see `tensor_results`."""

    @property
    def arg_names(self) -> list[str]:
        """Every function argument's name: the inputs, then the parameters by FQN."""
        return [*self.input_names, *self.param_names]

    def arguments(self, module: Any, inputs: Sequence[Any]) -> dict[str, Any]:
        """The function's arguments as numpy arrays keyed `arg0`, `arg1`, ... (how the
        printed program names them; `shardc-run --inputs` takes such a .npz): `inputs`,
        then the module's current parameters and buffers by FQN."""
        state = dict(module.named_parameters())
        state.update(module.named_buffers())
        values = [*inputs, *(state[n] for n in self.param_names)]
        return {f"arg{i}": v.detach().cpu().numpy() for i, v in enumerate(values)}


def tensor_results(output: Any) -> tuple[list[Any], list[str]]:
    """The tensors of a module's output, in order, and where each sits (its pytree key
    path: `logits`, `hidden_states.1`; `""` for a bare tensor). A transformers
    `ModelOutput` gives its tensor fields in order. A cache (`past_key_values`: a
    transformers `Cache`, whether or not its version registers it as a pytree) and what
    is not a tensor (None, plain Python values) are no results: a cache is state for the
    next call, not a value of this function, and the keys and values it would hold are
    computed anyway by the attention that stores them."""
    import sys

    import torch
    from torch.utils import _pytree as pytree

    cache_utils = sys.modules.get("transformers.cache_utils")
    cache_type = getattr(cache_utils, "Cache", None)

    def is_cache(x: Any) -> bool:
        return cache_type is not None and isinstance(x, cache_type)

    def name(path: Sequence[Any]) -> str:
        parts = (getattr(k, "key", getattr(k, "idx", getattr(k, "name", k))) for k in path)
        return ".".join(str(p) for p in parts)

    leaves, _ = pytree.tree_flatten_with_path(output, is_leaf=is_cache)
    kept = [(name(path), leaf) for path, leaf in leaves if isinstance(leaf, torch.Tensor)]
    return [leaf for _, leaf in kept], [n for n, _ in kept]


def export_module(
    module: Any,
    example_inputs: Sequence[Any],
    *,
    func_name: str = "forward",
    input_names: Sequence[str] | None = None,
    params_as_args: bool = True,
) -> ExportedModule:
    """Export `module(*example_inputs)` to linalg-on-tensors with torch-mlir.

    With `params_as_args` (the default) every parameter and buffer is an argument of the
    function (through `torch.func.functional_call`), non-persistent buffers (a rotary
    embedding's `inv_freq`, BERT's `position_ids`) included; tied parameters appear once,
    under the first name `named_parameters()` gives them. Without it they are baked
    constants. The function's results are the output's tensors (`tensor_results`: one
    for a module returning a tensor, a `ModelOutput`'s tensor fields in order, a cache
    dropped); `result_names` says which is which."""
    torch, fx = require_torch()
    names = list(input_names) if input_names is not None else [f"input{i}" for i in range(len(example_inputs))]
    if len(names) != len(example_inputs):
        raise ValueError(f"{len(names)} input names for {len(example_inputs)} example inputs")
    params: dict[str, Any] = {}
    if params_as_args:
        params = {k: v.detach() for k, v in module.named_parameters()}
        params.update({k: v.detach() for k, v in module.named_buffers()})
    keys = list(params)
    result_names: list[str] = []

    class _Traced(torch.nn.Module):
        """What torch.export sees: the inputs (and, with `params_as_args`, the state) as
        arguments, the output's tensors as results. The module is held outside the
        submodule tree, so that torch.export lifts none of its state: an unused lifted
        non-persistent buffer is what torch-mlir's frozen import cannot map."""

        def __init__(self):
            super().__init__()
            object.__setattr__(self, "inner", module)

        def forward(self, *args):
            inputs, flat = args[: len(names)], args[len(names) :]
            if params_as_args:
                out = torch.func.functional_call(self.inner, dict(zip(keys, flat)), tuple(inputs))
            else:
                out = self.inner(*inputs)
            if isinstance(out, torch.Tensor):
                result_names[:] = [""]
                return out
            tensors, where = tensor_results(out)
            result_names[:] = where
            return tuple(tensors)

    from torch.nn.attention import SDPBackend, sdpa_kernel

    # SDPA traced in its math form: the fused CPU kernel's output has the strides of
    # a [batch, seq, heads, dim] tensor, so a model's `.view` after `transpose(1, 2)`
    # (GPT-2) is recorded as a plain view, which torch-mlir's decomposition of the
    # kernel (contiguous [batch, heads, seq, dim]) can no longer take.
    with sdpa_kernel([SDPBackend.MATH]), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mlir_module = fx.export_and_import(
            _Traced(),
            *example_inputs,
            *params.values(),
            output_type="linalg-on-tensors",
            func_name=func_name,
            decomposition_table=decomposition_table(),
        )
    return ExportedModule(str(mlir_module), func_name, names, keys, result_names)

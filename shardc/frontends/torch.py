"""PyTorch `nn.Module` -> linalg-on-tensors IR through torch-mlir.

The parameters become function arguments (after the module's own inputs, in
`named_parameters()` order), never baked constants, so a sharding plan can name them by
their fully qualified name (FQN). torch and torch-mlir are the optional `[torch]` extra;
importing this module without them raises a `MissingTorch` with the install line.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
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


@dataclass
class ExportedModule:
    """torch-mlir's output for one module: the MLIR text and what its arguments are."""

    text: str
    func_name: str
    input_names: list[str]
    param_names: list[str]

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
    function (through `torch.func.functional_call`); tied parameters appear once, under
    the first name `named_parameters()` gives them."""
    torch, fx = require_torch()
    names = list(input_names) if input_names is not None else [f"input{i}" for i in range(len(example_inputs))]
    if len(names) != len(example_inputs):
        raise ValueError(f"{len(names)} input names for {len(example_inputs)} example inputs")
    params: dict[str, Any] = {}
    if params_as_args:
        params = {k: v.detach() for k, v in module.named_parameters()}
        params.update({k: v.detach() for k, v in module.named_buffers()})
    keys = list(params)

    class _Stateless(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = module

        def forward(self, *args):
            inputs, flat = args[: len(names)], args[len(names) :]
            return torch.func.functional_call(self.inner, dict(zip(keys, flat)), tuple(inputs))

    target = _Stateless() if params_as_args else module
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mlir_module = fx.export_and_import(
            target,
            *example_inputs,
            *params.values(),
            output_type="linalg-on-tensors",
            func_name=func_name,
        )
    return ExportedModule(str(mlir_module), func_name, names, keys)

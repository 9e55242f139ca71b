"""A small CNN written the way PyTorch users write one, for the tests of convolutions split
by image height (interfaces/conv.py): conv 3x3 pad 1, relu, conv 3x3 stride 2 pad 1, max
pool 2, conv 3x3 pad 1. `height_split_program` exports it with torch-mlir and annotates
the image split by height over a 1-D grid.
"""

from __future__ import annotations

from typing import Any

from shardc.frontends.torch import ExportedModule, export_module, require_torch

torch, _ = require_torch()
nn = torch.nn
F = torch.nn.functional


class SmallCNN(nn.Module):
    def __init__(self, channels: int = 3, width: int = 8, out: int = 4):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, width, 3, stride=2, padding=1)
        self.conv3 = nn.Conv2d(width, out, 3, padding=1)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(self.conv2(x), 2)
        return self.conv3(x)


def small_cnn_export(batch: int = 2, size: int = 16, seed: int = 0) -> tuple[SmallCNN, tuple, ExportedModule]:
    torch.manual_seed(seed)
    model = SmallCNN()
    x = torch.randn(batch, 3, size, size)
    return model, (x,), export_module(model, (x,), func_name="cnn", input_names=["x"])


def height_split_program(exported: ExportedModule, ranks: int) -> str:
    """The export with its image split by height (dimension 2) over a grid of `ranks`."""
    from shardc.frontends.annotate import annotate_arguments

    return annotate_arguments(exported.text, (ranks,), {"x": [[], [], [0]]}, names=exported.arg_names)


def arguments(model: Any, inputs: tuple, exported: ExportedModule) -> list[Any]:
    """The exported function's arguments in order, as numpy arrays."""
    import numpy as np

    named = exported.arguments(model, inputs)
    return [np.ascontiguousarray(named[f"arg{i}"]) for i in range(len(exported.arg_names))]

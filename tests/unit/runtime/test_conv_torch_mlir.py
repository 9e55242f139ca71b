"""Convolutional modules as torch-mlir imports them (`linalg-on-tensors`: conv and
pooling named ops, `tensor.pad`, windowed linalg.generic, max-pool indices for the
backward), run by the runtime against PyTorch: each layer alone, a small CNN's forward,
transformers' ViT patch embedding, and a CNN trained by `train_module` against
`torch.optim.AdamW`. Every program runs without the general path (its warning is an
error here)."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
fx = pytest.importorskip("torch_mlir.fx")
nn = torch.nn
F = torch.nn.functional

from shardc.runtime import compile_text  # noqa: E402


def _import(model: nn.Module, x: torch.Tensor) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return str(fx.export_and_import(model.eval(), x, output_type="linalg-on-tensors"))


def _run(text: str, *args: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        cm = compile_text(text)
        (fn,) = cm.functions
        return cm.call(fn, *args)


LAYERS = {
    "conv2d": (lambda: nn.Conv2d(4, 6, 3), (2, 4, 8, 8)),
    "conv2d-groups2": (lambda: nn.Conv2d(4, 6, 3, groups=2, bias=False), (2, 4, 8, 8)),
    "conv2d-depthwise": (lambda: nn.Conv2d(4, 4, 3, groups=4), (2, 4, 8, 8)),
    "conv2d-depthwise-multiplier": (lambda: nn.Conv2d(4, 8, 3, groups=4), (2, 4, 8, 8)),
    "conv2d-stride2-dilation2-padding1": (lambda: nn.Conv2d(4, 6, 3, stride=2, dilation=2, padding=1), (2, 4, 9, 9)),
    "conv2d-same": (lambda: nn.Conv2d(4, 6, 4, padding="same"), (2, 4, 8, 8)),
    "conv2d-transposed": (lambda: nn.ConvTranspose2d(4, 6, 3, stride=2), (2, 4, 5, 5)),
    "conv1d": (lambda: nn.Conv1d(4, 6, 3, stride=2, padding=1), (2, 4, 9)),
    "conv1d-depthwise": (lambda: nn.Conv1d(4, 4, 3, groups=4), (2, 4, 9)),
    "conv3d": (lambda: nn.Conv3d(2, 3, 3, padding=1), (1, 2, 5, 5, 5)),
    "conv3d-groups2": (lambda: nn.Conv3d(2, 4, 3, groups=2), (1, 2, 5, 5, 5)),
    "maxpool2d": (lambda: nn.MaxPool2d(2), (2, 4, 8, 8)),
    "maxpool2d-padding-ceil": (lambda: nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True), (2, 4, 8, 8)),
    "avgpool2d": (lambda: nn.AvgPool2d(2), (2, 4, 8, 8)),
    "avgpool2d-padding": (lambda: nn.AvgPool2d(3, stride=2, padding=1), (2, 4, 8, 8)),
    "avgpool2d-padding-uncounted": (lambda: nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), (2, 4, 8, 8)),
    "avgpool2d-ceil": (lambda: nn.AvgPool2d(3, stride=2, ceil_mode=True), (2, 4, 8, 8)),
    "adaptive-avgpool-1x1": (lambda: nn.AdaptiveAvgPool2d((1, 1)), (2, 4, 8, 8)),
    "adaptive-avgpool-2x2": (lambda: nn.AdaptiveAvgPool2d((2, 2)), (2, 4, 8, 8)),
    "adaptive-maxpool-1x1": (lambda: nn.AdaptiveMaxPool2d((1, 1)), (2, 4, 8, 8)),
    "batchnorm2d-eval": (lambda: nn.BatchNorm2d(4), (2, 4, 8, 8)),
    "maxpool1d": (lambda: nn.MaxPool1d(2), (2, 4, 8)),
    "avgpool1d": (lambda: nn.AvgPool1d(2), (2, 4, 8)),
    "maxpool3d": (lambda: nn.MaxPool3d(2), (1, 2, 4, 4, 4)),
    "avgpool3d": (lambda: nn.AvgPool3d(2), (1, 2, 4, 4, 4)),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(LAYERS))
def test_layer_equals_pytorch(name: str) -> None:
    make, shape = LAYERS[name]
    torch.manual_seed(0)
    layer = make().eval()
    if isinstance(layer, nn.BatchNorm2d):  # statistics that are not the identity
        layer.running_mean.uniform_(-1, 1)
        layer.running_var.uniform_(0.5, 2)
        nn.init.uniform_(layer.weight, 0.5, 1.5)
        nn.init.uniform_(layer.bias, -1, 1)
    x = torch.randn(*shape)
    with torch.no_grad():
        want = layer(x).numpy()
    got = _run(_import(layer, x), x.numpy())
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


class SmallCNN(nn.Module):
    """conv + batchnorm (eval) + relu + max pool, a strided conv, adaptive average pool, linear."""

    def __init__(self, classes: int = 5) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.fc = nn.Linear(8, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.relu(self.conv2(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, (1, 1)), 1))


@pytest.mark.slow
def test_small_cnn_forward_equals_pytorch() -> None:
    torch.manual_seed(0)
    model = SmallCNN().eval()
    model.bn1.running_mean.uniform_(-0.5, 0.5)
    model.bn1.running_var.uniform_(0.5, 2)
    x = torch.randn(4, 3, 16, 16)
    text = _import(model, x)
    assert "linalg.conv_2d_nchw_fchw" in text and "linalg.pooling_nchw_max" in text
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(_run(text, x.numpy()), want, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_vit_patch_embedding_equals_pytorch() -> None:
    """transformers' ViT embeddings as built (a conv with kernel = stride = patch size,
    the class token and position embeddings)."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.ViTConfig(image_size=16, patch_size=4, num_channels=3, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16)
    torch.manual_seed(0)
    emb = transformers.models.vit.modeling_vit.ViTEmbeddings(cfg).eval()
    x = torch.randn(2, 3, 16, 16)
    text = _import(emb, x)
    assert "strides = dense<4>" in text
    with torch.no_grad():
        want = emb(x).numpy()
    np.testing.assert_allclose(_run(text, x.numpy()), want, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_convnext_forward_equals_pytorch() -> None:
    """transformers' ConvNeXt as built from a small config (its patchify conv, 7x7
    depthwise convolutions, channels-last layer norms): the logits."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.ConvNextConfig(num_channels=3, hidden_sizes=[8, 16], depths=[1, 1], num_stages=2, patch_size=4, image_size=32, num_labels=4)
    torch.manual_seed(0)
    model = transformers.ConvNextForImageClassification(cfg).eval()
    x = torch.randn(2, 3, 32, 32)
    text = _import(model, x)
    assert "linalg.depthwise_conv_2d_nchw_chw" in text
    with torch.no_grad():
        want = model(x).logits.numpy()
    np.testing.assert_allclose(_run(text, x.numpy()), want, rtol=1e-4, atol=1e-5)


class TrainCNN(nn.Module):
    """conv + relu + max pool, a strided dilated conv, average pool, linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 6, 3, stride=2, padding=1, dilation=2)
        self.fc = nn.Linear(6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.relu(self.conv2(x))
        return self.fc(torch.flatten(F.avg_pool2d(x, 3), 1))


@pytest.mark.slow
def test_cnn_step_gradients_equal_pytorch() -> None:
    """The imported training step (conv, max pool and average pool backward) gives
    PyTorch's loss and gradients."""
    from shardc.frontends.torch_train import export_train_step
    from shardc.launch import run_program

    torch.manual_seed(0)
    model = TrainCNN()
    x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 5, (4,))
    exported = export_train_step(model, (x,), (y,), F.cross_entropy)
    for op in ("linalg.conv_2d_nchw_fchw", "linalg.pooling_nchw_max", "linalg.pooling_nchw_sum"):
        assert op in exported.text
    params = [p.detach().numpy() for p in model.parameters()]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        loss, *grads = run_program(exported.text, [x.numpy(), y.numpy(), *params], ranks=1)
    m = copy.deepcopy(model)
    want = F.cross_entropy(m(x), y)
    want.backward()
    assert abs(float(loss) - want.item()) < 1e-5
    for (name, p), got in zip(m.named_parameters(), grads):
        np.testing.assert_allclose(got, p.grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)


def test_cnn_training_equals_torch_adamw() -> None:
    from shardc.frontends.torch_train import train_module

    torch.manual_seed(0)
    model = TrainCNN()
    batches = [(torch.randn(4, 3, 16, 16), torch.randint(0, 5, (4,))) for _ in range(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        result = train_module(model, batches, F.cross_entropy, steps=3, lr=1e-2)
    m = copy.deepcopy(model)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    want = []
    for x, y in batches:
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        want.append(loss.item())
    np.testing.assert_allclose(result.losses, want, rtol=1e-5)
    for k, v in m.named_parameters():
        np.testing.assert_allclose(result.params[k], v.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=k)


def test_max_pool_gradient_goes_to_the_first_maximum() -> None:
    """Ties in a window (integers drawn from a few values): the backward's index search
    (`select(out == -1, select(x == max, position, out), out)`) sends the gradient to the
    first maximum in window order, as PyTorch does."""
    from shardc.frontends.torch_train import export_train_step
    from shardc.launch import run_program

    class Pool(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = nn.Parameter(torch.ones(1, 2, 7, 7))  # a gradient per pixel: which tie wins shows

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.max_pool2d(x * self.scale, 3, stride=2, padding=1)

    torch.manual_seed(0)
    model = Pool()
    x = torch.randint(0, 3, (2, 2, 7, 7)).float()
    target = torch.randn(2, 2, 4, 4)
    exported = export_train_step(model, (x,), (target,), F.mse_loss)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        loss, grad = run_program(exported.text, [x.numpy(), target.numpy(), model.scale.detach().numpy()], ranks=1)
    m = copy.deepcopy(model)
    want_loss = F.mse_loss(m(x), target)
    want_loss.backward()
    assert abs(float(loss) - want_loss.item()) < 1e-6
    np.testing.assert_allclose(grad, m.scale.grad.numpy(), rtol=1e-5, atol=1e-6)


AVG_POOLS = {
    "k2": dict(kernel_size=2),
    "k3-s2-p1": dict(kernel_size=3, stride=2, padding=1),
    "k3-s2-p1-uncounted": dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    "k3-s2-ceil": dict(kernel_size=3, stride=2, ceil_mode=True),
    "k3-s2-p1-ceil": dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    "k3-s2-p1-ceil-uncounted": dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    "k2x3-s1x2": dict(kernel_size=(2, 3), stride=(1, 2)),
    "divisor-override": dict(kernel_size=2, divisor_override=3),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(AVG_POOLS))
def test_avg_pool_gradient_equals_pytorch(name: str) -> None:
    """avg_pool2d's backward, which torch-mlir cannot lower, through the training
    import's decomposition (`frontends/torch_decomp.py`): every divisor rule."""
    from shardc.frontends.torch_train import export_train_step
    from shardc.launch import run_program

    kw = AVG_POOLS[name]

    class Pool(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = nn.Parameter(torch.randn(1, 2, 7, 8))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.avg_pool2d(x * self.scale, **kw)

    torch.manual_seed(0)
    model = Pool()
    x = torch.randn(2, 2, 7, 8)
    with torch.no_grad():
        target = torch.randn(model(x).shape)
    exported = export_train_step(model, (x,), (target,), F.mse_loss)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        loss, grad = run_program(exported.text, [x.numpy(), target.numpy(), model.scale.detach().numpy()], ranks=1)
    m = copy.deepcopy(model)
    want_loss = F.mse_loss(m(x), target)
    want_loss.backward()
    assert abs(float(loss) - want_loss.item()) < 1e-6
    np.testing.assert_allclose(grad, m.scale.grad.numpy(), rtol=1e-5, atol=1e-6)


GROUPED = {
    "groups2-stride2-padding1-dilation2": (2, dict(groups=2, stride=2, padding=1, dilation=2)),
    "depthwise-stride2": (2, dict(groups=4, stride=2, padding=1)),
    "depthwise-stride3-uneven": (2, dict(groups=4, stride=3, padding=2)),
    "conv1d-groups2": (1, dict(groups=2, padding=1)),
    "conv3d-groups2": (3, dict(groups=2, padding=1)),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(GROUPED))
def test_grouped_conv_gradients_equal_pytorch(name: str) -> None:
    """Grouped and depthwise convolutions' backward (which torch-mlir imports wrongly or
    not at all) through the training import's decomposition: two layers, so that the
    second's input gradient feeds the first's weight gradient."""
    from shardc.frontends.torch_train import export_train_step
    from shardc.launch import run_program

    nd, kw = GROUPED[name]
    conv = (nn.Conv1d, nn.Conv2d, nn.Conv3d)[nd - 1]
    torch.manual_seed(0)
    model = nn.Sequential(conv(4, 4, 3, **kw), nn.ReLU(), conv(4, 8, 3, groups=2, padding=1))
    x = torch.randn(2, 4, *([9] * nd))
    with torch.no_grad():
        target = torch.randn(model(x).shape)
    exported = export_train_step(model, (x,), (target,), F.mse_loss)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        loss, *grads = run_program(exported.text, [x.numpy(), target.numpy(), *(p.detach().numpy() for p in model.parameters())], ranks=1)
    m = copy.deepcopy(model)
    want = F.mse_loss(m(x), target)
    want.backward()
    assert abs(float(loss) - want.item()) < 1e-6
    for (pname, p), got in zip(m.named_parameters(), grads):
        np.testing.assert_allclose(got, p.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=pname)

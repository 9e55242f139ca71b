"""BERT's training step as transformers builds it: the token-type embedding's gradient
is a tm_tensor.scatter of the batch's rows through replicated int64 indices (a constant
buffer) into a constant zero init. Sharding propagation used to give that scatter an
option without a grid and fail an assertion, on any number of ranks. Trained here
for 2 AdamW steps, data parallel on 2 ranks, against torch.optim.AdamW."""

from __future__ import annotations

import copy

import numpy as np
import pytest


@pytest.mark.slow
@pytest.mark.parametrize("world", [2])
def test_bert_masked_lm_trains_like_torch(world: int) -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed: pip install -e '.[torch]'")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[torch]'")
    from shardc.frontends.torch_train import train_module

    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )
    model = transformers.BertForMaskedLM._from_config(config, attn_implementation="eager")
    ids, targets = torch.randint(0, 64, (2, 8)), torch.randint(0, 64, (2, 8))

    def loss_fn(out, t):
        return torch.nn.functional.cross_entropy(out.logits.reshape(-1, 64), t.reshape(-1))

    ref = copy.deepcopy(model)
    opt = torch.optim.AdamW(ref.parameters(), lr=1e-3)
    losses = []
    for _ in range(2):
        opt.zero_grad()
        loss = loss_fn(ref(ids), targets)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    result = train_module(copy.deepcopy(model), [(ids, targets)] * 2, loss_fn, world=world, steps=2, lr=1e-3)
    np.testing.assert_allclose([s.loss for s in result.log], losses, rtol=1e-5)
    name = "bert.embeddings.token_type_embeddings.weight"
    want = dict(ref.named_parameters())[name].detach().numpy()
    np.testing.assert_allclose(result.params[name], want, rtol=1e-4, atol=1e-6)
    assert not np.array_equal(want, dict(model.named_parameters())[name].detach().numpy())  # it was trained

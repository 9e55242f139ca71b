"""A direct numpy implementation of the same GPT, written the usual way (fused qkv matrix
split into heads, masked_fill, log-softmax), as the reference the IR is checked against."""

import numpy as np


def layernorm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps) * w
    return y + b if b is not None else y


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def loss(cfg, p, tokens, targets):
    B, T = tokens.shape
    C, H = cfg.n_embd, cfg.n_head
    D = C // H
    x = p["wte"][tokens] + p["wpe"][:T]
    causal = np.tril(np.ones((T, T), dtype=bool))
    for i in range(cfg.n_layer):
        pre = f"h.{i}"
        h = layernorm(x, p[f"{pre}.ln_1.weight"], p.get(f"{pre}.ln_1.bias"))
        W = p[f"{pre}.attn.c_attn.weight"].reshape(C, 3 * C)
        qkv = h @ W
        if f"{pre}.attn.c_attn.bias" in p:
            qkv = qkv + p[f"{pre}.attn.c_attn.bias"].reshape(3 * C)
        q, k, v = np.split(qkv, 3, axis=-1)
        q, k, v = (a.reshape(B, T, H, D).transpose(0, 2, 1, 3) for a in (q, k, v))
        att = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D)
        att = np.where(causal, att, -np.inf)
        att = np.exp(att - att.max(-1, keepdims=True))
        att = att / att.sum(-1, keepdims=True)
        y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
        y = y @ p[f"{pre}.attn.c_proj.weight"].reshape(C, C)
        if f"{pre}.attn.c_proj.bias" in p:
            y = y + p[f"{pre}.attn.c_proj.bias"]
        x = x + y
        h = layernorm(x, p[f"{pre}.ln_2.weight"], p.get(f"{pre}.ln_2.bias"))
        h = gelu(h @ p[f"{pre}.mlp.c_fc.weight"] + p.get(f"{pre}.mlp.c_fc.bias", 0.0))
        h = h @ p[f"{pre}.mlp.c_proj.weight"] + p.get(f"{pre}.mlp.c_proj.bias", 0.0)
        x = x + h
    x = layernorm(x, p["ln_f.weight"], p.get("ln_f.bias"))
    logits = x @ p["wte"].T
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return -np.take_along_axis(logp, targets[..., None], -1).mean()


def adamw(p, g, m, v, lr, step, beta1, beta2, eps, wd, decay):
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    mhat = m / (1 - beta1**step)
    vhat = v / (1 - beta2**step)
    if decay:
        p = p * (1 - lr * wd)
    return p - lr * mhat / (np.sqrt(vhat) + eps), m, v


def ordered(cfg, params):
    """Parameters by path -> the list in function-argument order."""
    from shardc.training.gpt import param_specs

    return [params[s.path] for s in param_specs(cfg)]

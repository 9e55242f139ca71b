"""`shardc-train --torch-model hf:...`: a Hugging Face `transformers` model by name.

    shardc-train --torch-model hf:LlamaForCausalLM --model-config cfg.json --np 4 --tp 2
    shardc-train --torch-model hf:path/to/saved --np 2      # a save_pretrained directory

`hf:CLASS` builds the transformers class from `--model-config` (a JSON object of its config's
fields; random init seeded by `--seed`; `vocab_size` defaults to the trainer's tokenizer);
`hf:DIR` loads DIR/config.json and DIR's safetensors weights with `from_pretrained`, offline
(`local_files_only`, the hub's offline flags): nothing is ever downloaded. The model runs
in eval mode (no dropout: the compiled step draws no random numbers) and in float32.

The task is the class's, by transformers' own task mappings: a causal LM
(`...ForCausalLM`, `GPT2LMHeadModel`, ...) learns next-token cross-entropy on the trainer's
token batches (`model(input_ids).logits` against the next tokens); a masked LM
(`...ForMaskedLM`) learns to restore tokens hidden by BERT's rule (`MaskingRule`: 15% of
positions, 80% of them replaced by a mask id, 10% by a random token, 10% kept; the loss is
the cross-entropy at those positions, as transformers computes it from `labels`). The
mask id is the first id past the tokenizer's tokens; the config's `vocab_size` must hold
the tokenizer's ids (and the mask id). An image classifier (`...ForImageClassification`) learns
cross-entropy on synthetic images (`SyntheticImages`: each class a fixed random template
plus noise, the label from the batch's first tokens), `config.image_size` and
`num_labels` as configured.

Logical axes are derived from module types and names, never written by the user
(`derive_layouts`): Megatron's column-parallel projections (q/k/v, gate/up, `c_fc`, `fc1`,
`wi`, BERT's `intermediate.dense`) split their output features over `shard`, the
row-parallel ones (o/down, `c_proj`, `fc2`, `wo`, BERT's `output.dense`) their input
features, the token embedding and an untied LM head their vocabulary (ZeRO only, as the
built-in GPT's). `nn.Linear` stores `[out, in]`, transformers' GPT-2 `Conv1D` `[in, out]`.
A fused projection (GPT-2's `c_attn` = q|k|v, `query_key_value`, `qkv_proj`, `gate_up_proj`)
is not split for tensor parallelism: a contiguous split of its fused features would give
rank 0 all of q and part of k instead of a share of each, so that block (the fused layer
and its partner) stays whole on every rank and only ZeRO splits its storage. Norm gains
and biases are trained without weight decay (transformers' Trainer does the same).
`hf_task(..., axes=..., plan=...)` is for a `FILE.py:FACTORY` that overrides them.

Output (`pretrained_state`, `write_config`): `model.safetensors` holds the state dict as
`save_pretrained` writes it (transformers' key names, tied aliases removed) and
`config.json` goes beside it, so `CLASS.from_pretrained(OUT)` loads the trained model.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from shardc.frontends.torch_train import LogicalAxes, TorchTask, TorchTrainError
from shardc.training.axis import ShardingPlan
from shardc.training.mesh import BATCH, SHARD

PREFIX = "hf:"

# Logical axis names of the derived layouts: attention's query/output heads, key/value
# heads (fewer with grouped-query attention), the MLP's hidden features, the vocabulary
# (ZeRO only), the features of a block with a fused projection (ZeRO only).
HEADS, KV_HEADS, MLP, VOCAB, FUSED = "heads", "kv_heads", "mlp", "vocab", "fused"
DERIVED_PLAN = ShardingPlan(
    tp_rules={HEADS: SHARD, KV_HEADS: SHARD, MLP: SHARD},
    zero_rules={HEADS: BATCH, KV_HEADS: BATCH, MLP: BATCH, VOCAB: BATCH, FUSED: BATCH},
)

# The last name of an nn.Linear / Conv1D -> the logical axis of its split features. Column:
# output features split; row: input features (the partial sums meet in an all_reduce).
# Single letters (T5's q, k, v, o) count only inside an attention module; GPT-2's c_proj
# and BERT's dense layers are told apart by their parent (`derive_layouts`).
_COLUMN = {
    "q_proj": HEADS, "query": HEADS, "q_lin": HEADS, "q": HEADS,
    "k_proj": KV_HEADS, "key": KV_HEADS, "k_lin": KV_HEADS, "k": KV_HEADS,
    "v_proj": KV_HEADS, "value": KV_HEADS, "v_lin": KV_HEADS, "v": KV_HEADS,
    "gate_proj": MLP, "up_proj": MLP, "c_fc": MLP, "fc1": MLP, "fc_in": MLP, "wi": MLP, "wi_0": MLP, "wi_1": MLP,
    "w1": MLP, "w3": MLP, "dense_h_to_4h": MLP, "lin1": MLP,
}
_ROW = {"o_proj": HEADS, "out_proj": HEADS, "out_lin": HEADS, "o": HEADS, "down_proj": MLP, "fc2": MLP, "fc_out": MLP, "wo": MLP, "w2": MLP,
        "dense_4h_to_h": MLP, "lin2": MLP}
_FUSED = {"c_attn", "qkv_proj", "query_key_value", "Wqkv", "qkv", "gate_up_proj"}
_ATTENTION_PARENTS = {"attn", "attention", "self_attn", "self_attention", "SelfAttention", "EncDecAttention", "crossattention"}


@dataclass(frozen=True)
class DerivedLayouts:
    """Axes by exact FQN pattern, the plan that splits them, the parameters trained
    without weight decay, and notes on what was kept whole and why."""

    axes: dict[str, LogicalAxes]
    """Parameter FQN -> logical axes (parameters not listed are replicated)."""
    plan: ShardingPlan
    no_decay: tuple[str, ...]
    """Parameter FQNs trained without weight decay."""
    notes: tuple[str, ...] = ()
    roles: dict[str, str] = field(default_factory=dict)
    """Module FQN -> "column:<axis>", "row:<axis>", "fused", "whole" (a fused layer's
    partner) or "vocab": what each split is."""


def is_hf_spec(spec: str | None) -> bool:
    return bool(spec) and str(spec).startswith(PREFIX)


def _transformers() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach the hub, even by accident
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        import transformers
        from transformers.utils import logging as hf_logging
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise TorchTrainError(f"--torch-model hf:... needs transformers: pip install -e '.[torch]' ({e})") from None
    hf_logging.disable_progress_bar()  # shardc-train's output is its own
    return transformers


# =========================================================================================
# Loading
# =========================================================================================


def _class(name: str) -> Any:
    transformers = _transformers()
    cls = getattr(transformers, name, None) if name.isidentifier() else None
    if cls is None or not isinstance(cls, type) or not issubclass(cls, transformers.PreTrainedModel):
        models = [n for n in dir(transformers) if n.endswith(("Model", "LMHeadModel")) or "For" in n]
        near = difflib.get_close_matches(name, models, n=3)
        hint = f" (did you mean {', '.join(near)}?)" if near else " (a model class transformers exports, e.g. LlamaForCausalLM, or hf:DIR of a save_pretrained directory)"
        raise TorchTrainError(f"--torch-model hf:{name}: no transformers model class {name}{hint}")
    return cls


def _read_config_json(path: str) -> dict[str, Any]:
    try:
        fields = json.loads(Path(path).read_text())
    except OSError as e:
        raise TorchTrainError(f"--model-config {path}: cannot read it: {e.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TorchTrainError(f"--model-config {path}: not JSON: {e}") from None
    if not isinstance(fields, dict):
        raise TorchTrainError(f"--model-config {path}: expected a JSON object of the config's fields, got {type(fields).__name__}")
    return fields


def _ids_needed(kind: str, vocab_size: int | None, n_tokens: int | None) -> int | None:
    """The fewest vocabulary ids a run needs: the tokenizer's tokens, plus the mask id of
    a masked LM (none for an image classifier)."""
    if kind == IMAGE_CLASSIFIER:
        return None
    n = n_tokens if n_tokens is not None else vocab_size
    return None if n is None else n + (kind == MASKED_LM)


def _default_vocab(kind: str, vocab_size: int | None, n_tokens: int | None) -> int | None:
    """The tokenizer's (padded) vocabulary, doubled for a masked LM when no padding id is
    left for the mask (doubling keeps the padding's multiple)."""
    need = _ids_needed(kind, vocab_size, n_tokens)
    if vocab_size is None or need is None:
        return vocab_size
    return vocab_size if vocab_size >= need else 2 * vocab_size


def _check_vocab(spec: str, config: Any, kind: str, vocab_size: int | None, n_tokens: int | None) -> None:
    have, need = getattr(config, "vocab_size", None), _ids_needed(kind, vocab_size, n_tokens)
    if have is not None and need is not None and have < need:
        what = f"the tokenizer's {need - (kind == MASKED_LM)} tokens" + (" and a mask id" if kind == MASKED_LM else "")
        raise TorchTrainError(
            f"--torch-model {spec}: the config's vocab_size {have} is smaller than {what}: "
            "raise vocab_size (or leave it out of --model-config to take the tokenizer's)"
        )


def _check_positions(spec: str, config: Any, block_size: int) -> None:
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        n = getattr(config, name, None)
        if isinstance(n, int) and n < block_size:
            raise TorchTrainError(f"--torch-model {spec}: the config's {name} is {n}, less than --block-size {block_size}")


def build_model(spec: str, *, model_config: str | None = None, vocab_size: int | None = None, block_size: int | None = None,
                seed: int = 0, n_tokens: int | None = None) -> Any:
    """`hf:CLASS` (with `model_config`, a JSON file of the config's fields) or `hf:DIR` ->
    the transformers model in eval mode, float32, for a task `task_kind` knows; problems
    as one-line TorchTrainErrors. `vocab_size`, `n_tokens`: the tokenizer's padded
    vocabulary and the ids it produces."""
    import torch

    name = spec[len(PREFIX):] if spec.startswith(PREFIX) else spec
    if not name:
        raise TorchTrainError(f"--torch-model {spec!r}: expected hf:CLASS (with --model-config) or hf:DIR")
    looks_like_path = os.sep in name or "/" in name or name.startswith(".") or Path(name).exists()
    if looks_like_path:
        if model_config is not None:
            raise TorchTrainError(f"--model-config goes with hf:CLASS; hf:{name} reads its own {Path(name) / 'config.json'}")
        model = _load_directory(spec, Path(name), vocab_size, block_size, n_tokens)
    else:
        if model_config is None:
            raise TorchTrainError(f"--torch-model {spec} needs --model-config CONFIG.json: the config's fields (hidden_size, num_hidden_layers, ...)")
        cls = _class(name)
        kind = task_kind(cls.__name__)
        fields = _read_config_json(model_config)
        config_class = cls.config_class
        _refuse_typos(model_config, config_class, fields)
        if "vocab_size" not in fields and vocab_size is not None and kind != IMAGE_CLASSIFIER:
            fields["vocab_size"] = _default_vocab(kind, vocab_size, n_tokens)
        try:
            config = config_class(**fields)
        except Exception as e:  # noqa: BLE001 - transformers' own check of the user's config: one line
            raise TorchTrainError(f"--model-config {model_config}: {config_class.__name__} rejects it: {_one_line(e)}") from None
        _check_vocab(spec, config, kind, vocab_size, n_tokens)
        if block_size is not None and kind != IMAGE_CLASSIFIER:
            _check_positions(spec, config, block_size)
        torch.manual_seed(seed)
        try:
            model = cls(config)
        except Exception as e:  # noqa: BLE001 - the class refuses the config: one line
            raise TorchTrainError(f"--model-config {model_config}: {name} rejects the config: {_one_line(e)}") from None
    return model.float().eval()


def _refuse_typos(path: str, config_class: Any, fields: Mapping[str, Any]) -> None:
    """A field the config does not have but nearly spells one it has ('hiden_size') is
    refused; other unknown fields pass, as transformers keeps them (configs carry legacy
    names such as rope_theta that the class still takes)."""
    import inspect

    try:
        known = set(config_class().to_dict()) | set(getattr(config_class, "attribute_map", {}))
        known |= set(inspect.signature(config_class.__init__).parameters) - {"self", "kwargs"}
    except Exception:  # noqa: BLE001 - a config with no defaults (composite ones): no typo check
        return
    for name in sorted(set(fields) - known):
        near = difflib.get_close_matches(name, known, n=1, cutoff=0.85)
        if near:
            raise TorchTrainError(f"--model-config {path}: {name!r} is not a {config_class.__name__} field (did you mean {near[0]!r}?)")


def _load_directory(spec: str, d: Path, vocab_size: int | None, block_size: int | None, n_tokens: int | None) -> Any:
    transformers = _transformers()
    if not d.is_dir():
        raise TorchTrainError(f"--torch-model {spec}: no directory {d}")
    if not (d / "config.json").is_file():
        raise TorchTrainError(f"--torch-model {spec}: {d} has no config.json (a save_pretrained directory has one)")
    if not any(d.glob("*.safetensors")) and not (d / "model.safetensors.index.json").is_file():
        other = [p.name for p in d.glob("*.bin")]
        more = f" ({', '.join(other)} is not read: save with safetensors)" if other else ""
        raise TorchTrainError(f"--torch-model {spec}: {d} has no safetensors weights (model.safetensors){more}")
    try:
        config = transformers.AutoConfig.from_pretrained(str(d), local_files_only=True)
    except Exception as e:  # noqa: BLE001 - the user's config.json: one line
        raise TorchTrainError(f"--torch-model {spec}: {d / 'config.json'}: {_one_line(e)}") from None
    archs = getattr(config, "architectures", None) or []
    if not archs:
        raise TorchTrainError(f"--torch-model {spec}: {d / 'config.json'} names no architectures (the class save_pretrained records)")
    cls = _class(archs[0])
    kind = task_kind(cls.__name__)
    _check_vocab(spec, config, kind, vocab_size, n_tokens)
    if block_size is not None and kind != IMAGE_CLASSIFIER:
        _check_positions(spec, config, block_size)
    try:
        return cls.from_pretrained(str(d), local_files_only=True, dtype="float32")
    except Exception as e:  # noqa: BLE001 - transformers refused the directory: one line
        raise TorchTrainError(f"--torch-model {spec}: {cls.__name__}.from_pretrained({d}) failed: {_one_line(e)}") from None


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:300]}" if text else type(e).__name__


# =========================================================================================
# Layouts
# =========================================================================================


def derive_layouts(model: Any) -> DerivedLayouts:
    """Logical axes for every parameter of `model` from its module types and names (see
    the module docstring); parameters of unknown layers are replicated."""
    import torch.nn as nn

    conv1d = _conv1d_class()
    roles: dict[str, str] = {}
    fused_parents: set[str] = set()
    modules = dict(model.named_modules())
    for fqn, m in modules.items():
        leaf = fqn.rpartition(".")[2]
        if isinstance(m, (nn.Linear, *conv1d)) and leaf in _FUSED:
            roles[fqn] = "fused"
            fused_parents.add(fqn.rpartition(".")[0])
    tables = (_embeddings(model, "get_input_embeddings"), _embeddings(model, "get_output_embeddings"))
    vocab_modules = {id(m) for m in tables if m is not None and getattr(getattr(m, "weight", None), "ndim", 0) == 2}
    for fqn, m in modules.items():
        parent, _, leaf = fqn.rpartition(".")
        if id(m) in vocab_modules:
            roles[fqn] = "vocab"
            continue
        if not isinstance(m, (nn.Linear, *conv1d)) or fqn in roles:
            continue
        in_attention = parent.rpartition(".")[2] in _ATTENTION_PARENTS  # T5 names them q, k, v, o
        if parent in fused_parents:
            roles[fqn] = "whole"  # the partner of a fused projection: its block is not split
        elif leaf in _COLUMN and (len(leaf) > 1 or in_attention):
            roles[fqn] = f"column:{_COLUMN[leaf]}"
        elif leaf in _ROW and (len(leaf) > 1 or in_attention):
            roles[fqn] = f"row:{_ROW[leaf]}"
        elif leaf == "c_proj":
            roles[fqn] = f"row:{HEADS if parent.rpartition('.')[2] in _ATTENTION_PARENTS else MLP}"
        elif leaf == "dense" and parent.endswith("intermediate"):
            roles[fqn] = f"column:{MLP}"  # BERT: intermediate.dense
        elif leaf == "dense" and parent.endswith("attention.output"):
            roles[fqn] = f"row:{HEADS}"  # BERT: attention.output.dense
        elif leaf == "dense" and parent.endswith(".output") and (parent.rpartition(".")[0] + ".intermediate") in modules:
            roles[fqn] = f"row:{MLP}"  # BERT: the layer's output.dense after intermediate.dense
    # Tied parameters (an LM head sharing the embedding's table) appear once in
    # named_parameters: axes go to the FQN it lists.
    canonical = {id(p): n for n, p in model.named_parameters()}
    axes: dict[str, LogicalAxes] = {}
    for fqn, role in roles.items():
        m = modules[fqn]
        transposed = _is_conv1d(m, conv1d)  # Conv1D stores [in, out]
        kind, _, name = role.partition(":")
        b_axes: LogicalAxes | None
        if kind == "vocab":
            w_axes, b_axes = (VOCAB, None), (VOCAB,)  # Embedding [vocab, dim]; a head Linear [vocab, dim]
        elif kind in ("fused", "whole"):
            w_axes, b_axes = ((None, FUSED) if transposed else (FUSED, None)), (FUSED,)
        elif kind == "column":
            w_axes, b_axes = ((None, name) if transposed else (name, None)), (name,)
        else:  # row: input features split, the bias is added after the all_reduce
            w_axes, b_axes = ((name, None) if transposed else (None, name)), None
        for p, ax in ((getattr(m, "weight", None), w_axes), (getattr(m, "bias", None), b_axes)):
            if p is not None and ax is not None and id(p) in canonical and canonical[id(p)] not in axes:
                axes[canonical[id(p)]] = ax
    no_decay = tuple(_no_decay_names(model))
    notes = tuple(
        f"{fqn} fuses several projections in its output features: a contiguous split would cut across them, "
        "so its block stays whole under --tp (ZeRO still splits its storage)"
        for fqn, role in roles.items() if role == "fused"
    )
    return DerivedLayouts(axes, DERIVED_PLAN, no_decay, notes, roles)


def _embeddings(model: Any, getter: str) -> Any:
    """The token table (or LM head) transformers names, None where the class has none."""
    get = getattr(model, getter, None)
    try:
        return get() if callable(get) else None
    except (NotImplementedError, AttributeError):
        return None


def _conv1d_class() -> tuple[type, ...]:
    try:
        from transformers.pytorch_utils import Conv1D
    except ImportError:  # pragma: no cover
        return ()
    return (Conv1D,)


def _is_conv1d(m: Any, conv1d: tuple[type, ...]) -> bool:
    return bool(conv1d) and isinstance(m, conv1d)


def _no_decay_names(model: Any) -> list[str]:
    """Biases and the gains of norm layers (any module class named ...Norm)."""
    names = []
    norm_modules = {fqn for fqn, m in model.named_modules() if type(m).__name__.endswith(("Norm", "NormRMS", "LayerNorm2d"))}
    for n, _ in model.named_parameters():
        owner, _, leaf = n.rpartition(".")
        if leaf == "bias" or owner in norm_modules:
            names.append(n)
    return names


def check_whole_heads(model: Any, layouts: DerivedLayouts, tp: int) -> None:
    """Under --tp every rank must hold whole attention heads (and whole key/value heads
    for grouped-query attention): a split that cuts a head is refused in one line."""
    if tp <= 1:
        return
    config = getattr(model, "config", None)
    used = {r.partition(":")[2] for r in layouts.roles.values()}
    for axis, attr in ((HEADS, "num_attention_heads"), (KV_HEADS, "num_key_value_heads")):
        if axis not in used:
            continue
        n = getattr(config, attr, None)
        if n is None and axis == KV_HEADS:
            n = getattr(config, "num_attention_heads", None)
        if isinstance(n, int) and n % tp:
            raise TorchTrainError(
                f"{type(model).__name__}: tp={tp} does not divide {attr}={n}: each rank must hold whole attention heads "
                f"(use a tp that divides {n})"
            )


# =========================================================================================
# The task
# =========================================================================================


CAUSAL_LM, MASKED_LM, IMAGE_CLASSIFIER = "causal-lm", "masked-lm", "image-classifier"


def task_kind(class_name: str) -> str:
    """CAUSAL_LM, MASKED_LM or IMAGE_CLASSIFIER by transformers' own task mappings, else a
    TorchTrainError."""
    from transformers.models.auto import modeling_auto as auto

    for kind, names in (
        (CAUSAL_LM, auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES),
        (MASKED_LM, auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES),
        (IMAGE_CLASSIFIER, auto.MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES),
    ):
        if any(class_name == n or (isinstance(n, tuple) and class_name in n) for n in names.values()):
            return kind
    raise TorchTrainError(
        f"--torch-model hf:{class_name}: shardc-train trains causal language models from transformers "
        "(the ...ForCausalLM classes, GPT2LMHeadModel, ...), masked ones (...ForMaskedLM) and image classifiers "
        "(...ForImageClassification); write a FILE.py:FACTORY for other tasks"
    )


def causal_lm_loss(output: Any, targets: Any) -> Any:
    """Next-token cross-entropy: the model's logits at each position against the token
    that follows it (the trainer's targets are the inputs shifted by one)."""
    import torch.nn.functional as F

    logits = output.logits
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


def masked_lm_loss(output: Any, labels: Any, weights: Any) -> Any:
    """Cross-entropy at the masked positions only (`weights` 1 there, 0 elsewhere), the
    mean over them: what transformers computes from `labels` with -100 elsewhere."""
    import torch.nn.functional as F

    logits = output.logits
    per_token = F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), reduction="none")
    w = weights.reshape(-1)
    return (per_token * w).sum() / w.sum().clamp_min(1.0)


@dataclass(frozen=True)
class MaskingRule:
    """BERT's masking (Devlin et al. 2019; transformers' DataCollatorForLanguageModeling):
    each position is chosen with probability `rate`; a chosen token becomes `mask_id` 80%
    of the time, a random token 10%, stays itself 10%, and is predicted. The draw is a
    seeded function of the batch's tokens, so every rank, a resumed run and the held-out
    batches mask the same way with no state of their own."""

    mask_id: int
    n_tokens: int
    seed: int = 0
    rate: float = 0.15

    def __call__(self, tokens: np.ndarray, _next_tokens: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(masked tokens, labels, weights float32) for int64 tokens [batch, block]."""
        import zlib

        rng = np.random.default_rng([self.seed, zlib.crc32(np.ascontiguousarray(tokens).tobytes())])
        chosen = rng.random(tokens.shape) < self.rate
        how = rng.random(tokens.shape)
        masked = tokens.copy()
        masked[chosen & (how < 0.8)] = self.mask_id
        swap = chosen & (how >= 0.8) & (how < 0.9)
        masked[swap] = rng.integers(0, self.n_tokens, size=int(swap.sum()))
        return masked, tokens.astype(np.int64), chosen.astype(np.float32)


def image_classification_loss(output: Any, labels: Any) -> Any:
    """Cross-entropy of the class logits against the labels (transformers' single-label
    classification loss)."""
    import torch.nn.functional as F

    return F.cross_entropy(output.logits, labels)


@dataclass(frozen=True)
class SyntheticImages:
    """Images an image classifier can learn, made from the trainer's token batches: the
    label of a sequence is its first token modulo `num_labels`; its image is that class's
    fixed random template (seeded by `seed`) plus Gaussian noise of `noise` times the
    template's scale, drawn as a seeded function of the batch (the same on every rank, in
    a resumed run and for the held-out batches)."""

    channels: int
    height: int
    width: int
    num_labels: int
    seed: int = 0
    noise: float = 0.5

    def __call__(self, tokens: np.ndarray, _next_tokens: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(pixel values float32 [batch, channels, height, width], labels int64 [batch])."""
        import zlib

        shape = (self.channels, self.height, self.width)
        templates = np.random.default_rng([self.seed, 1]).standard_normal((self.num_labels, *shape))
        labels = (tokens[:, 0] % self.num_labels).astype(np.int64)
        rng = np.random.default_rng([self.seed, 2, zlib.crc32(np.ascontiguousarray(tokens).tobytes())])
        pixels = templates[labels] + self.noise * rng.standard_normal((len(labels), *shape))
        return pixels.astype(np.float32), labels


def _image_shape(config: Any) -> tuple[int, int, int]:
    size = getattr(config, "image_size", None)
    h, w = (size, size) if isinstance(size, int) else tuple(size) if size else (None, None)
    c = getattr(config, "num_channels", 3)
    if not isinstance(h, int) or not isinstance(w, int):
        raise TorchTrainError(
            f"{type(config).__name__} names no image_size: the synthetic images need one "
            '(add "image_size": SIDE to the --model-config JSON)'
        )
    return int(c), int(h), int(w)


def generate_causal(model: Any, prompt: Sequence[int], n_tokens: int, *, temperature: float = 0.8, top_k: int | None = None,
                    seed: int = 0, n_valid: int | None = None) -> list[int]:
    """`--sample`'s hook: the last `max_position_embeddings` tokens in, the next one drawn
    from the last position's logits (`shardc.training.sample.pick`)."""
    import torch

    from shardc.training.sample import pick

    rng = np.random.default_rng(seed)
    window = getattr(model.config, "max_position_embeddings", None) or getattr(model.config, "n_positions", None) or 1 << 30
    ids = list(prompt)
    model.eval()
    with torch.no_grad():
        for _ in range(n_tokens):
            logits = model(torch.tensor([ids[-window:]], dtype=torch.long)).logits[0, -1]
            ids.append(pick(logits.double().numpy(), temperature, top_k, rng, n_valid))
    return ids[len(prompt):]


def hf_task(
    spec: str,
    *,
    model_config: str | None = None,
    vocab_size: int | None = None,
    block_size: int | None = None,
    seed: int = 0,
    axes: Mapping[str, LogicalAxes] | None = None,
    plan: ShardingPlan | None = None,
    tp: int = 1,
    n_tokens: int | None = None,
) -> TorchTask:
    """The TorchTask of a transformers model by name (`hf:CLASS` + `model_config`, or
    `hf:DIR`): model, loss, derived axes and plan, no-decay names and a sampling hook.
    `axes` (FQN patterns) win over the derived axes for the parameters they match;
    `plan` replaces the derived plan; `tp`: refuse a degree that would cut attention
    heads; `n_tokens`: the ids the tokenizer produces (default `vocab_size`). A masked LM
    is trained with `MaskingRule` (mask id: the first id past the tokenizer's tokens)."""
    if not spec.startswith(PREFIX):
        spec = PREFIX + spec
    model = build_model(spec, model_config=model_config, vocab_size=vocab_size, block_size=block_size, seed=seed, n_tokens=n_tokens)
    kind = task_kind(type(model).__name__)
    layouts = derive_layouts(model)
    if plan is None:
        check_whole_heads(model, layouts, tp)
    merged: dict[str, LogicalAxes] = dict(axes or {})  # first match wins: the user's patterns first
    try:
        user = [re.compile(p) for p in merged]
    except re.error as e:
        raise TorchTrainError(f"axes pattern {e.pattern!r} is not a regular expression: {e}") from None
    for name, ax in layouts.axes.items():
        if not any(rx.fullmatch(name) for rx in user):
            merged[re.escape(name)] = ax
    no_decay = tuple(re.escape(n) for n in layouts.no_decay)
    chosen = plan or layouts.plan
    if kind == IMAGE_CLASSIFIER:
        images = SyntheticImages(*_image_shape(model.config), num_labels=model.config.num_labels, seed=seed)
        return TorchTask(model, image_classification_loss, merged, chosen, kind="lm", no_decay=no_decay, make_batch=images)
    if kind == MASKED_LM:
        produced = n_tokens if n_tokens is not None else (vocab_size if vocab_size is not None else model.config.vocab_size - 1)
        rule = MaskingRule(mask_id=produced, n_tokens=produced, seed=seed)
        return TorchTask(model, masked_lm_loss, merged, chosen, kind="lm", no_decay=no_decay, make_batch=rule)
    return TorchTask(model, causal_lm_loss, merged, chosen, kind="lm", no_decay=no_decay, generate=generate_causal)


# =========================================================================================
# Output
# =========================================================================================


def pretrained_state(model: Any, state_dict: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The tensors `save_pretrained` would write for `model` holding `state_dict`:
    transformers' key names, tied aliases and non-persistent buffers left out, any weight
    conversion of the class reverted."""
    from transformers.core_model_loading import revert_weight_conversion
    from transformers.modeling_utils import remove_tied_weights_from_state_dict

    model.load_state_dict(dict(state_dict))
    sd = remove_tied_weights_from_state_dict(model.state_dict(), model)
    sd = revert_weight_conversion(model, sd)
    return {k: v.detach().cpu().contiguous().numpy() for k, v in sd.items()}


def dropout_note(model: Any) -> str | None:
    """A line saying the config's dropout is off, when it asks for some: the model runs in
    eval mode because shardc's compiled step draws no random numbers."""
    import torch.nn as nn

    rates = {k: v for k, v in model.config.to_dict().items() if ("dropout" in k or "pdrop" in k) and isinstance(v, (int, float)) and v > 0}
    rates |= {fqn: m.p for fqn, m in model.named_modules() if isinstance(m, nn.Dropout) and m.p > 0} if not rates else {}
    if not rates:
        return None
    shown = ", ".join(f"{k}={v:g}" for k, v in list(rates.items())[:3]) + (", ..." if len(rates) > 3 else "")
    return f"note: trained without dropout ({shown}): shardc's compiled step draws no random numbers"


def write_config(model: Any, out: str | Path) -> Path:
    """config.json beside model.safetensors (with the class in `architectures`)."""
    model.config.architectures = [type(model).__name__]
    model.config.save_pretrained(str(out))
    return Path(out) / "config.json"


__all__ = [
    "CAUSAL_LM",
    "DERIVED_PLAN",
    "DerivedLayouts",
    "IMAGE_CLASSIFIER",
    "MASKED_LM",
    "MaskingRule",
    "SyntheticImages",
    "build_model",
    "causal_lm_loss",
    "check_whole_heads",
    "derive_layouts",
    "dropout_note",
    "generate_causal",
    "hf_task",
    "image_classification_loss",
    "is_hf_spec",
    "masked_lm_loss",
    "pretrained_state",
    "task_kind",
    "write_config",
]

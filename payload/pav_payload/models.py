"""The models: tiny by default (two CPU processes train them in seconds), or a ~1B transformer preset."""

from dataclasses import dataclass

import torch
from torch import nn

from pav_payload.resnet import ResNet50

VOCAB_SIZE = 1000
# Narrow ends keep the regression well conditioned for small batches, so the loss falls within a few steps.
MLP_FEATURES = 32
HEADS = 4
# For resnet50 the "width" is the stem's channel count: 64 is the standard ResNet-50.
DEFAULT_D_MODEL = {"mlp": 256, "transformer": 128, "resnet50": 64}
DEFAULT_LR = {"mlp": 1e-2, "transformer": 3e-3, "resnet50": 1e-3}
MODELS = tuple(DEFAULT_D_MODEL)


@dataclass(frozen=True)
class SizePreset:
    """Transformer dimensions (and the batch and learning rate that suit them); any flag overrides one."""

    d_model: int
    layers: int
    heads: int
    vocab_size: int
    seq_len: int
    batch_size: int  # per rank
    lr: float


# "1b": 1,142,467,840 parameters (see transformer_parameters). Batch 4 x 2048 tokens per rank fits an
# 80 GB GPU in float32 under FSDP; the lower learning rate keeps a model this wide from diverging.
SIZES = {
    "1b": SizePreset(
        d_model=2048, layers=20, heads=16, vocab_size=32000, seq_len=2048, batch_size=4, lr=3e-4
    ),
}


@dataclass(frozen=True)
class ModelConfig:
    kind: str
    d_model: int
    layers: int
    seq_len: int
    heads: int = HEADS
    vocab_size: int = VOCAB_SIZE
    image_size: int = 224  # resnet50 only: square RGB inputs


def build_model(config: ModelConfig) -> nn.Module:
    if config.kind == "mlp":
        return MLP(config.d_model, config.layers)
    if config.kind == "transformer":
        return TinyLM(config.d_model, config.layers, config.seq_len, config.heads, config.vocab_size)
    if config.kind == "resnet50":
        return ResNet50(config.d_model)
    raise ValueError(f"unknown model {config.kind!r}")


def transformer_parameters(d_model: int, layers: int, seq_len: int, vocab_size: int) -> int:
    """TinyLM's parameter count in closed form (it does not depend on the number of heads)."""
    d = d_model
    # Per block: attention in/out projections 4d^2 + 4d, feed-forward d -> 4d -> d 8d^2 + 5d, 2 LayerNorms 4d.
    block = 12 * d * d + 13 * d
    # Embedding, learned positions, blocks, final LayerNorm, output head with bias.
    return vocab_size * d + seq_len * d + layers * block + 2 * d + d * vocab_size + vocab_size


class MLP(nn.Module):
    """MLP_FEATURES -> width -> ... -> MLP_FEATURES; ``layers`` counts the linear layers."""

    def __init__(self, width: int, layers: int) -> None:
        super().__init__()
        if layers < 2:
            raise ValueError("the MLP needs at least two layers")
        blocks: list[nn.Module] = [nn.Linear(MLP_FEATURES, width), nn.ReLU()]
        for _ in range(layers - 2):
            blocks += [nn.Linear(width, width), nn.ReLU()]
        blocks.append(nn.Linear(width, MLP_FEATURES))
        self.net = nn.Sequential(*blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def shard_units(self) -> list[nn.Module]:
        """The submodules FSDP shards (and gathers) one at a time, before the root takes the rest."""
        return [layer for layer in self.net if isinstance(layer, nn.Linear)]


class TinyLM(nn.Module):
    """Decoder-only language model built from stock PyTorch layers."""

    def __init__(
        self, d_model: int, layers: int, seq_len: int, heads: int = HEADS, vocab_size: int = VOCAB_SIZE
    ) -> None:
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model {d_model} must be a multiple of {heads} heads")
        self.embed = nn.Embedding(vocab_size, d_model)
        self.position = nn.Parameter(torch.randn(seq_len, d_model) * 0.02)
        block = nn.TransformerEncoderLayer(
            d_model, heads, 4 * d_model, dropout=0.0, batch_first=True, norm_first=True
        )
        # Nested tensors only help padded batches and warn when combined with norm_first.
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        length = tokens.shape[1]
        hidden = self.embed(tokens) + self.position[:length]
        # Built per call rather than kept as a buffer: a model without buffers gives DDP nothing to sync.
        mask = nn.Transformer.generate_square_subsequent_mask(length, device=tokens.device)
        hidden = self.blocks(hidden, mask=mask, is_causal=True)
        return self.head(self.norm(hidden))

    def shard_units(self) -> list[nn.Module]:
        """One FSDP unit per transformer block; the root keeps embedding, positions, final norm and head."""
        return list(self.blocks.layers)

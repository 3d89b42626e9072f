"""Tiny models: big enough to exercise DDP's gradient buckets, small enough for two CPU processes."""

from dataclasses import dataclass

import torch
from torch import nn

VOCAB_SIZE = 1000
# Narrow ends keep the regression well conditioned for small batches, so the loss falls within a few steps.
MLP_FEATURES = 32
HEADS = 4
DEFAULT_D_MODEL = {"mlp": 256, "transformer": 128}
DEFAULT_LR = {"mlp": 1e-2, "transformer": 3e-3}
MODELS = tuple(DEFAULT_D_MODEL)


@dataclass(frozen=True)
class ModelConfig:
    kind: str
    d_model: int
    layers: int
    seq_len: int


def build_model(config: ModelConfig) -> nn.Module:
    if config.kind == "mlp":
        return MLP(config.d_model, config.layers)
    if config.kind == "transformer":
        return TinyLM(config.d_model, config.layers, config.seq_len)
    raise ValueError(f"unknown model {config.kind!r}")


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


class TinyLM(nn.Module):
    """Decoder-only language model built from stock PyTorch layers."""

    def __init__(self, d_model: int, layers: int, seq_len: int) -> None:
        super().__init__()
        if d_model % HEADS:
            raise ValueError(f"d_model {d_model} must be a multiple of {HEADS} heads")
        self.embed = nn.Embedding(VOCAB_SIZE, d_model)
        self.position = nn.Parameter(torch.randn(seq_len, d_model) * 0.02)
        block = nn.TransformerEncoderLayer(
            d_model, HEADS, 4 * d_model, dropout=0.0, batch_first=True, norm_first=True
        )
        # Nested tensors only help padded batches and warn when combined with norm_first.
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, VOCAB_SIZE)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        length = tokens.shape[1]
        hidden = self.embed(tokens) + self.position[:length]
        # Built per call rather than kept as a buffer: a model without buffers gives DDP nothing to sync.
        mask = nn.Transformer.generate_square_subsequent_mask(length, device=tokens.device)
        hidden = self.blocks(hidden, mask=mask, is_causal=True)
        return self.head(self.norm(hidden))

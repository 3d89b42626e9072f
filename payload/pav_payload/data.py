"""Synthetic tasks with something to learn, so a falling loss shows that training actually works."""

from dataclasses import dataclass

import torch
from torch.nn import functional

from pav_payload.models import MLP_FEATURES, ModelConfig

PATTERN_PERIOD = 16
# Classes the synthetic images come from; the model still predicts over all 1000 ImageNet classes.
IMAGE_CLASSES = 10


@dataclass
class Batch:
    inputs: torch.Tensor
    targets: torch.Tensor


class TeacherRegression:
    """Regress onto a fixed random linear map: any working optimiser pulls the MSE down quickly."""

    tokens_per_sample = 0

    def __init__(self, width: int, batch_size: int, task_gen: torch.Generator, data_gen: torch.Generator):
        self.batch_size = batch_size
        self.width = width
        self.data_gen = data_gen
        self.teacher = torch.randn(width, width, generator=task_gen, device=data_gen.device) / width**0.5

    def batch(self) -> Batch:
        x = torch.randn(self.batch_size, self.width, generator=self.data_gen, device=self.data_gen.device)
        return Batch(x, x @ self.teacher)

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return functional.mse_loss(outputs, targets)


class RepeatingTokens:
    """Windows onto a fixed cycle of distinct tokens: the next token always follows from the current one."""

    def __init__(
        self,
        seq_len: int,
        vocab_size: int,
        batch_size: int,
        task_gen: torch.Generator,
        data_gen: torch.Generator,
    ):
        if vocab_size < PATTERN_PERIOD:
            raise ValueError(f"the vocabulary needs at least {PATTERN_PERIOD} tokens")
        device = data_gen.device
        self.batch_size = batch_size
        self.tokens_per_sample = seq_len
        self.data_gen = data_gen
        self.pattern = torch.randperm(vocab_size, generator=task_gen, device=device)[:PATTERN_PERIOD]
        self.steps = torch.arange(seq_len + 1, device=device)

    def batch(self) -> Batch:
        device = self.data_gen.device
        offsets = torch.randint(
            0, PATTERN_PERIOD, (self.batch_size, 1), generator=self.data_gen, device=device
        )
        tokens = self.pattern[(offsets + self.steps) % PATTERN_PERIOD]
        return Batch(tokens[:, :-1], tokens[:, 1:])

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return functional.cross_entropy(outputs.reshape(-1, outputs.shape[-1]), targets.reshape(-1))


class SyntheticImages:
    """Noisy copies of a few fixed random images, each its own class: ImageNet-shaped, learnable in steps."""

    tokens_per_sample = 0

    def __init__(
        self, image_size: int, batch_size: int, task_gen: torch.Generator, data_gen: torch.Generator
    ):
        device = data_gen.device
        self.batch_size = batch_size
        self.data_gen = data_gen
        shape = (IMAGE_CLASSES, 3, image_size, image_size)
        self.prototypes = torch.randn(shape, generator=task_gen, device=device)

    def batch(self) -> Batch:
        device = self.data_gen.device
        labels = torch.randint(0, IMAGE_CLASSES, (self.batch_size,), generator=self.data_gen, device=device)
        noise = torch.randn(
            (self.batch_size, *self.prototypes.shape[1:]), generator=self.data_gen, device=device
        )
        return Batch(self.prototypes[labels] + 0.5 * noise, labels)

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return functional.cross_entropy(outputs, targets)


Task = TeacherRegression | RepeatingTokens | SyntheticImages


def make_task(config: ModelConfig, batch_size: int, seed: int, rank: int, device: torch.device) -> Task:
    # The task is shared by all ranks; each rank draws its own samples, as a data-parallel shard would.
    task_gen = torch.Generator(device=device).manual_seed(seed)
    data_gen = torch.Generator(device=device).manual_seed(seed + 1 + rank)
    if config.kind == "mlp":
        return TeacherRegression(MLP_FEATURES, batch_size, task_gen, data_gen)
    if config.kind == "resnet50":
        return SyntheticImages(config.image_size, batch_size, task_gen, data_gen)
    return RepeatingTokens(config.seq_len, config.vocab_size, batch_size, task_gen, data_gen)

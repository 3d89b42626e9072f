"""ResNet-50 (He et al. 2015, v1.5: stride on the 3x3 conv) from stock layers: no torchvision on hosts.

``width`` is the stem's channel count (64 in the paper); the stages follow as width x (1, 2, 4, 8) with
4x bottleneck expansion, so width 64 gives the standard 25,557,032 parameters at 1000 classes. Smaller
widths keep the architecture (depth, strides, BatchNorm, residuals) for CPU tests.
"""

import torch
from torch import nn

STAGE_BLOCKS = (3, 4, 6, 3)
EXPANSION = 4
NUM_CLASSES = 1000


class Bottleneck(nn.Module):
    def __init__(self, in_ch: int, mid_ch: int, stride: int) -> None:
        super().__init__()
        out_ch = mid_ch * EXPANSION
        self.body = nn.Sequential(
            nn.Conv2d(in_ch, mid_ch, 1, bias=False),
            nn.BatchNorm2d(mid_ch),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid_ch, mid_ch, 3, stride=stride, padding=1, bias=False),
            nn.BatchNorm2d(mid_ch),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid_ch, out_ch, 1, bias=False),
            nn.BatchNorm2d(out_ch),
        )
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False), nn.BatchNorm2d(out_ch)
            )
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.body(x) + self.shortcut(x))


class ResNet50(nn.Module):
    def __init__(self, width: int = 64, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        stages: list[nn.Module] = []
        in_ch = width
        for index, blocks in enumerate(STAGE_BLOCKS):
            mid_ch = width * 2**index
            layers = []
            for block in range(blocks):
                layers.append(Bottleneck(in_ch, mid_ch, 2 if block == 0 and index > 0 else 1))
                in_ch = mid_ch * EXPANSION
            stages.append(nn.Sequential(*layers))
        self.stages = nn.Sequential(*stages)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(in_ch, num_classes))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.stages(self.stem(images)))

    def shard_units(self) -> list[nn.Module]:
        """Each bottleneck block is one FSDP unit."""
        return [block for stage in self.stages for block in stage]

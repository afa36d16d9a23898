"""The paper's parameter distribution: DeFINE / context model / input-output / total
(the columns of Tables 1a, 2 and 3)."""

import logging
from typing import Dict

import torch.nn as nn
from fairseq.modules import AdaptiveInput, AdaptiveSoftmax

from .modules.define.embedding import UNIT_TYPES

logger = logging.getLogger(__name__)

# Submodule names that fairseq models use for their input and output layers.
INPUT_OUTPUT_NAMES = {
    "embed_tokens",
    "output_projection",
    "project_out_dim",
    "project_in_dim",
    "adaptive_softmax",
    "embed_out",
    "fc_out",
}


def parameter_distribution(model: nn.Module) -> Dict[str, int]:
    """Count each parameter once (tied weights are shared) into the paper's columns.

    A projective "unit" (one Linear n->m) is part of the input layer, as in Table 2's
    projective rows; every other DeFINE unit counts as DeFINE."""
    seen = set()
    counts = {"define": 0, "context": 0, "input_output": 0}

    def take(module, column):
        for p in module.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                counts[column] += p.numel()

    for module in model.modules():
        if isinstance(module, UNIT_TYPES) and module.schedule.transform != "projective":
            take(module, "define")
    for name, module in model.named_modules():
        last = name.rsplit(".", 1)[-1]
        if last in INPUT_OUTPUT_NAMES or isinstance(module, (AdaptiveInput, AdaptiveSoftmax)):
            take(module, "input_output")
    take(model, "context")
    counts["total"] = sum(counts.values())
    return counts


def format_distribution(counts: Dict[str, int], name: str = "") -> str:
    m = {k: v / 1e6 for k, v in counts.items()}
    return (
        f"{name + ': ' if name else ''}DeFINE {m['define']:.2f}M | context model "
        f"{m['context']:.2f}M | input-output {m['input_output']:.2f}M | total {m['total']:.2f}M"
    )


def log_parameter_distribution(model: nn.Module, name: str = "") -> Dict[str, int]:
    counts = parameter_distribution(model)
    logger.info("parameters (paper's distribution): %s", format_distribution(counts, name))
    return counts

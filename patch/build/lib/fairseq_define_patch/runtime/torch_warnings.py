"""fairseq 0.12.2's calls into torch APIs whose notices a user cannot act on.

The encoder's fast path at inference (fairseq/models/transformer/transformer_encoder.py)
packs a padded batch into a nested tensor, and torch prints "The PyTorch API of nested
tensors is in prototype stage and will change in the near future" on the first call: every
fairseq-generate and fairseq-interactive of a Transformer printed it. The call is fairseq's;
only its notice is silenced, for this one call (compat/torch_warnings.py lists the others,
fixed at their calls).
"""

import warnings

import torch

__all__ = ["nested_tensor_from_mask"]


def nested_tensor_from_mask(x, mask):
    """``torch._nested_tensor_from_mask(x, mask)`` without torch's prototype notice."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors is in prototype stage")
        return torch._nested_tensor_from_mask(x, mask)

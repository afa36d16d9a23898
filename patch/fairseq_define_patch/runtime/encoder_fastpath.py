"""The encoder fast path reads the trained weights: no untrained copies as parameters.

fairseq 0.12.2's encoder layers registered a second copy of their weights as parameters for
torch's fused inference path (3.15M per Transformer-base layer), filled only when a state dict
is loaded and never trained: counted in fairseq-train's log, saved in every checkpoint, and
left DDP waiting for their gradients (--find-unused-parameters). fairseq/modules/
transformer_layer.py no longer registers them: its fast path reads the layer's own weights
(q, k and v concatenated on each call, under 1% of the layer's time on a CPU, on a path that
runs only in eval; written inline in the forward, which TorchScript compiles), and a state dict
that holds the copies loses them (``drop_fastpath_copies``), strict loading included.
fairseq/trainer.py passes an optimizer state saved by fairseq 0.12.2, which covers the copies too, through
``without_fastpath_copies``.
"""

import logging

import torch

__all__ = ["drop_fastpath_copies", "without_fastpath_copies"]

# the copies' names, as fairseq 0.12.2's TransformerEncoderLayerBase registered them
FASTPATH_COPIES = (
    "in_proj_weight", "in_proj_bias", "out_proj_weight", "out_proj_bias",
    "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias",
)


def drop_fastpath_copies(state_dict, prefix):
    """Checkpoints saved by fairseq 0.12.2 hold the copies: they are dropped when loaded."""
    for name in FASTPATH_COPIES:
        state_dict.pop(prefix + name, None)


logger = logging.getLogger("fairseq.trainer")  # the trainer's log, where the line was


def without_fastpath_copies(optim_state, model, criterion):
    """(fairseq_define) An optimizer state saved by fairseq 0.12.2 also covers the eight
    weight copies that each encoder layer registered as parameters for the inference fast
    path (the layer's own parameters, so listed before its submodules'), which are no longer
    parameters: their entries are dropped, per parameter or from a flat fp16 buffer. Any
    other state is returned unchanged."""
    from fairseq.modules.transformer_layer import TransformerEncoderLayerBase

    # the optimizer's parameters as fairseq 0.12.2 listed them: (parameter or None for a
    # copy, number of elements)
    old, seen = [], set()
    for m in model.modules():
        if isinstance(m, TransformerEncoderLayerBase):
            q, out = m.self_attn.q_proj, m.self_attn.out_proj
            sizes = (3 * q.weight.numel(), 3 * q.bias.numel(), out.weight.numel(), out.bias.numel(),
                     m.fc1.weight.numel(), m.fc1.bias.numel(), m.fc2.weight.numel(), m.fc2.bias.numel())
            old += [(None, n) for n in sizes]
        for p in m._parameters.values():
            if p is not None and id(p) not in seen:
                seen.add(id(p))
                if p.requires_grad:
                    old.append((p, p.numel()))
    old += [(p, p.numel()) for p in criterion.parameters() if p.requires_grad]
    copies = sum(1 for p, _ in old if p is None)
    groups = optim_state.get("param_groups") if isinstance(optim_state, dict) else None
    if not copies or not groups or len(groups) != 1:
        return optim_state
    saved, state = groups[0]["params"], optim_state.get("state", {})
    keep = [i for i, (p, _) in enumerate(old) if p is not None]
    if len(saved) == len(old):  # one entry per parameter
        new_state = {new: state[saved[i]] for new, i in enumerate(keep) if saved[i] in state}
        new_groups = [dict(groups[0], params=list(range(len(keep))))]
    else:  # --fp16: one flat buffer, the parameters' elements in the same order
        total = sum(n for _, n in old)
        flat = state.get(saved[0], {}) if len(saved) == 1 else {}
        if not any(torch.is_tensor(v) and v.dim() == 1 and v.numel() == total for v in flat.values()):
            return optim_state
        spans, start = [], 0
        for p, n in old:
            if p is not None:
                spans.append((start, start + n))
            start += n

        def cut(v):
            if torch.is_tensor(v) and v.dim() == 1 and v.numel() == total:
                return torch.cat([v[a:b] for a, b in spans])
            return v

        new_state = {saved[0]: {k: cut(v) for k, v in flat.items()}}
        new_groups = groups
    logger.info(
        "optimizer state saved by fairseq 0.12.2: dropped the entries of the encoder "
        "layers' %d fast-path weight copies (no longer parameters)", copies
    )
    return dict(optim_state, state=new_state, param_groups=new_groups)

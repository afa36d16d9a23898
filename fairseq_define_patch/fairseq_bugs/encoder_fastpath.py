"""The encoder fast path's untrained weight copies (fairseq 0.12.2, any stack)."""

from ..edits import Edit, FilePatch

# fairseq 0.12.2's encoder layers registered a second copy of their weights as parameters for
# torch's fused inference path (3.15M per Transformer-base layer), filled only when a state
# dict is loaded and never trained: counted in fairseq-train's log, saved in every checkpoint,
# and left DDP waiting for their gradients (--find-unused-parameters). The fast path now reads
# the trained weights themselves (q, k and v concatenated on each call, under 1% of the
# layer's time on a CPU, on a path that runs only in eval); checkpoints that hold the copies
# load with them dropped, strict loading included.
_FASTPATH_COPY_EDITS = (
    Edit(
        "        self.ever_training = False\n"
        "        # For BT, we need continuous mem\n"
        "        self.in_proj_weight = torch.nn.Parameter(\n"
        "            torch.zeros(\n"
        "                self.self_attn.q_proj.weight.shape[0] * 3,\n"
        "                self.self_attn.q_proj.weight.shape[1],\n"
        "            )\n"
        "        )\n"
        "        self.in_proj_bias = torch.nn.Parameter(\n"
        "            torch.zeros(self.self_attn.q_proj.bias.shape[0] * 3)\n"
        "        )\n"
        "        self.out_proj_weight = torch.nn.Parameter(\n"
        "            torch.zeros(self.self_attn.out_proj.weight.shape)\n"
        "        )\n"
        "        self.out_proj_bias = torch.nn.Parameter(\n"
        "            torch.zeros(self.self_attn.out_proj.bias.shape)\n"
        "        )\n"
        "        self.fc1_weight = torch.nn.Parameter(torch.zeros(self.fc1.weight.shape))\n"
        "        self.fc1_bias = torch.nn.Parameter(torch.zeros(self.fc1.bias.shape))\n"
        "        self.fc2_weight = torch.nn.Parameter(torch.zeros(self.fc2.weight.shape))\n"
        "        self.fc2_bias = torch.nn.Parameter(torch.zeros(self.fc2.bias.shape))\n",
        "        self.ever_training = False\n"
        "        # (fairseq_define) the fast path reads the trained weights (forward): no copies\n",
    ),
    Edit(
        "        self.load_to_BT = True\n"
        "\n"
        '        old_name = prefix + "self_attn."\n'
        '        q_proj_weight = state_dict[old_name + "q_proj.weight"]\n'
        '        k_proj_weight = state_dict[old_name + "k_proj.weight"]\n'
        '        v_proj_weight = state_dict[old_name + "v_proj.weight"]\n'
        '        q_proj_bias = state_dict[old_name + "q_proj.bias"]\n'
        '        k_proj_bias = state_dict[old_name + "k_proj.bias"]\n'
        '        v_proj_bias = state_dict[old_name + "v_proj.bias"]\n'
        "\n"
        "        new_name = prefix\n"
        '        state_dict[new_name + "in_proj_weight"] = torch.cat(\n'
        "            (q_proj_weight, k_proj_weight, v_proj_weight), dim=0\n"
        "        )\n"
        '        state_dict[new_name + "in_proj_bias"] = torch.cat(\n'
        "            (q_proj_bias, k_proj_bias, v_proj_bias), dim=0\n"
        "        )\n"
        '        state_dict[new_name + "out_proj_weight"] = state_dict[\n'
        '            old_name + "out_proj.weight"\n'
        "        ]\n"
        '        state_dict[new_name + "out_proj_bias"] = state_dict[old_name + "out_proj.bias"]\n'
        '        state_dict[new_name + "fc1_weight"] = state_dict[prefix + "fc1.weight"]\n'
        '        state_dict[new_name + "fc1_bias"] = state_dict[prefix + "fc1.bias"]\n'
        '        state_dict[new_name + "fc2_weight"] = state_dict[prefix + "fc2.weight"]\n'
        '        state_dict[new_name + "fc2_bias"] = state_dict[prefix + "fc2.bias"]\n',
        "        self.load_to_BT = True\n"
        "        # (fairseq_define) checkpoints saved by fairseq 0.12.2 hold the fast path's copies\n"
        "        for name in (\n"
        '            "in_proj_weight", "in_proj_bias", "out_proj_weight", "out_proj_bias",\n'
        '            "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias",\n'
        "        ):\n"
        "            state_dict.pop(prefix + name, None)\n",
    ),
    Edit(
        "                self.in_proj_weight,\n"
        "                self.in_proj_bias,\n"
        "                self.out_proj_weight,\n"
        "                self.out_proj_bias,\n",
        "                torch.cat(  # [3 * embed_dim, embed_dim]: q, k, v stacked\n"
        "                    (\n"
        "                        self.self_attn.q_proj.weight,\n"
        "                        self.self_attn.k_proj.weight,\n"
        "                        self.self_attn.v_proj.weight,\n"
        "                    )\n"
        "                ),\n"
        "                torch.cat(\n"
        "                    (\n"
        "                        self.self_attn.q_proj.bias,\n"
        "                        self.self_attn.k_proj.bias,\n"
        "                        self.self_attn.v_proj.bias,\n"
        "                    )\n"
        "                ),\n"
        "                self.self_attn.out_proj.weight,\n"
        "                self.self_attn.out_proj.bias,\n",
    ),
    Edit(
        "                self.fc1_weight,\n"
        "                self.fc1_bias,\n"
        "                self.fc2_weight,\n"
        "                self.fc2_bias,\n",
        "                self.fc1.weight,\n"
        "                self.fc1.bias,\n"
        "                self.fc2.weight,\n"
        "                self.fc2.bias,\n",
    ),
)


# Resuming from a checkpoint saved before the edits above: its optimizer state also covers the
# copies (Trainer._build_optimizer listed them among the parameters); their entries are cut
# out so that the state fits the parameters as they are now.
_OPTIMIZER_STATE_HELPER = """

def _without_fastpath_copies(optim_state, model, criterion):
    \"\"\"(fairseq_define) An optimizer state saved by fairseq 0.12.2 also covers the eight
    weight copies that each encoder layer registered as parameters for the inference fast
    path (the layer's own parameters, so listed before its submodules'), which are no longer
    parameters: their entries are dropped, per parameter or from a flat fp16 buffer. Any
    other state is returned unchanged.\"\"\"
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

"""

_OPTIMIZER_STATE_EDITS = (
    Edit(
        "                )\n"
        "\n"
        "            self.optimizer.load_state_dict(last_optim_state, optimizer_overrides)\n",
        "                )\n"
        "\n"
        "            last_optim_state = _without_fastpath_copies(  # (fairseq_define)\n"
        "                last_optim_state, self.model, self.criterion\n"
        "            )\n"
        "            self.optimizer.load_state_dict(last_optim_state, optimizer_overrides)\n",
    ),
    Edit(
        "            return xla_device_to_cpu(data)\n\n\ndef _catalog_shared_params(",
        "            return xla_device_to_cpu(data)\n" + _OPTIMIZER_STATE_HELPER + "\ndef _catalog_shared_params(",
    ),
)


PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/modules/transformer_layer.py",
        "the encoder fast path reads the trained weights: no untrained copies as parameters",
        _FASTPATH_COPY_EDITS,
    ),
    FilePatch(
        "fairseq",
        "fairseq/trainer.py",
        "resuming from an optimizer state that covers the encoder layers' former copies",
        _OPTIMIZER_STATE_EDITS,
    ),
)

"""The encoder fast path's untrained weight copies (fairseq 0.12.2, any stack)."""

from ..edits import CopiedModule, Edit, FilePatch

# fairseq 0.12.2's encoder layers registered a second copy of their weights as parameters for
# torch's fused inference path (3.15M per Transformer-base layer), filled only when a state
# dict is loaded and never trained: counted in fairseq-train's log, saved in every checkpoint,
# and left DDP waiting for their gradients (--find-unused-parameters). The fast path now reads
# the trained weights themselves (q, k and v concatenated on each call, under 1% of the
# layer's time on a CPU, on a path that runs only in eval); checkpoints that hold the copies
# load with them dropped, strict loading included. The code is runtime/encoder_fastpath.py.
COPIES = (CopiedModule("encoder_fastpath", "the encoder fast path reads the trained weights; old copies dropped"),)

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
        "        drop_fastpath_copies(state_dict, prefix)  # (fairseq_define) saved by fairseq 0.12.2\n",
    ),
    Edit(
        "                self.in_proj_weight,\n"
        "                self.in_proj_bias,\n"
        "                self.out_proj_weight,\n"
        "                self.out_proj_bias,\n",
        # inline, not a call: TorchScript compiles this forward (fairseq's export tests)
        "                torch.cat(  # (fairseq_define) the trained weights: q, k, v stacked\n"
        "                    (self.self_attn.q_proj.weight, self.self_attn.k_proj.weight, self.self_attn.v_proj.weight)\n"
        "                ),\n"
        "                torch.cat((self.self_attn.q_proj.bias, self.self_attn.k_proj.bias, self.self_attn.v_proj.bias)),\n"
        "                self.self_attn.out_proj.weight,\n"
        "                self.self_attn.out_proj.bias,\n",
    ),
    Edit(
        "from fairseq.modules.fairseq_dropout import FairseqDropout\nfrom fairseq.modules.quant_noise",
        "from fairseq.modules.fairseq_dropout import FairseqDropout\n"
        "from fairseq._define_runtime.encoder_fastpath import drop_fastpath_copies  # (fairseq_define)\n"
        "from fairseq.modules.quant_noise",
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
# copies; the trainer cuts their entries out (runtime/encoder_fastpath.py).
_OPTIMIZER_STATE_EDITS = (
    Edit(
        "                )\n"
        "\n"
        "            self.optimizer.load_state_dict(last_optim_state, optimizer_overrides)\n",
        "                )\n"
        "\n"
        "            from fairseq._define_runtime.encoder_fastpath import without_fastpath_copies\n\n"
        "            last_optim_state = without_fastpath_copies(  # (fairseq_define)\n"
        "                last_optim_state, self.model, self.criterion\n"
        "            )\n"
        "            self.optimizer.load_state_dict(last_optim_state, optimizer_overrides)\n",
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

"""The encoder fast path's untrained weight copies (fairseq 0.12.2, any stack)."""

from ..edits import CopiedModule, Edit, FilePatch, insert_after, insert_before, replace_span

# fairseq 0.12.2's encoder layers registered a second copy of their weights as parameters for
# torch's fused inference path (3.15M per Transformer-base layer), filled only when a state
# dict is loaded and never trained: counted in fairseq-train's log, saved in every checkpoint,
# and left DDP waiting for their gradients (--find-unused-parameters). The fast path now reads
# the trained weights themselves (q, k and v concatenated on each call, under 1% of the
# layer's time on a CPU, on a path that runs only in eval); checkpoints that hold the copies
# load with them dropped, strict loading included. The code is runtime/encoder_fastpath.py.
COPIES = (CopiedModule("encoder_fastpath", "the encoder fast path reads the trained weights; old copies dropped"),)

_FASTPATH_COPY_EDITS = (
    replace_span(  # the copies' 20 lines of parameters
        "        # For BT, we need continuous mem\n",
        "        self.fc2_bias = torch.nn.Parameter(torch.zeros(self.fc2.bias.shape))\n",
        "        # (fairseq_define) the fast path reads the trained weights (forward): no copies\n",
    ),
    replace_span(  # filling them from a loaded state dict
        '        old_name = prefix + "self_attn."\n',
        '        state_dict[new_name + "fc2_bias"] = state_dict[prefix + "fc2.bias"]\n',
        "        drop_fastpath_copies(state_dict, prefix)  # (fairseq_define) saved by fairseq 0.12.2\n",
    ),
    # inline, not a call: TorchScript compiles this forward (fairseq's export tests)
    Edit(
        "                self.in_proj_weight,\n                self.in_proj_bias,\n",
        "                torch.cat((self.self_attn.q_proj.weight, self.self_attn.k_proj.weight, "
        "self.self_attn.v_proj.weight)),\n"
        "                torch.cat((self.self_attn.q_proj.bias, self.self_attn.k_proj.bias, "
        "self.self_attn.v_proj.bias)),\n",
    ),
    Edit(
        "                self.out_proj_weight,\n                self.out_proj_bias,\n",
        "                self.self_attn.out_proj.weight,\n                self.self_attn.out_proj.bias,\n",
    ),
    insert_after(
        "from fairseq.modules.fairseq_dropout import FairseqDropout\n",
        "from fairseq._define_runtime.encoder_fastpath import drop_fastpath_copies  # (fairseq_define)\n",
    ),
    Edit(
        "                self.fc1_weight,\n                self.fc1_bias,\n",
        "                self.fc1.weight,\n                self.fc1.bias,\n",
    ),
    Edit(
        "                self.fc2_weight,\n                self.fc2_bias,\n",
        "                self.fc2.weight,\n                self.fc2.bias,\n",
    ),
)


# Resuming from a checkpoint saved before the edits above: its optimizer state also covers the
# copies; the trainer cuts their entries out (runtime/encoder_fastpath.py).
_OPTIMIZER_STATE_EDITS = (
    insert_before(
        "            self.optimizer.load_state_dict(last_optim_state, optimizer_overrides)\n",
        "            from fairseq._define_runtime.encoder_fastpath import without_fastpath_copies  # (fairseq_define)\n"
        "            last_optim_state = without_fastpath_copies(last_optim_state, self.model, self.criterion)\n",
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

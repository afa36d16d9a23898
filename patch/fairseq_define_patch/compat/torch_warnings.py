"""No warning that a user cannot act on from fairseq 0.12.2's own calls under torch 2.

Every ``fairseq-train`` printed three (test: tests/test_settings_checks.py runs the stock
commands on a CPU and finds no warning):

- "'pin_memory' argument is set as true but no accelerator is found": fairseq's data
  iterators pin their batches' memory always; they now pin it only where torch has an
  accelerator to copy it to (torch.accelerator, torch >= 2.6);
- "`torch.cuda.amp.autocast(args...)` is deprecated" (each training step) and the same for
  ``torch.cuda.amp.GradScaler`` (--amp): the calls are now torch.amp's, with device "cuda",
  which torch's deprecated names forwarded to;
- "Support for mismatched key_padding_mask and attn_mask is deprecated" (a decoder's
  self-attention: a boolean padding mask beside the float future mask): the padding mask is
  turned into the float mask torch itself made of it (0 where kept, -inf where padded), so
  the attention computes the same numbers.

fairseq-generate and fairseq-interactive printed a fourth, torch's notice that nested tensors
are a prototype, from the encoder's fast path: that call goes through
runtime/torch_warnings.py, which silences this notice of this call only.
"""

from ..edits import CopiedModule, Edit, FilePatch, insert_after, insert_before

COPIES = (CopiedModule("torch_warnings", "the encoder fast path's nested tensors without torch's prototype notice"),)

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/data/iterators.py",
        "torch 2: pin batches' memory only where there is an accelerator (no warning on a CPU)",
        (
            Edit(
                "            worker_init_fn=worker_init_fn,\n            pin_memory=True,\n",
                "            worker_init_fn=worker_init_fn,\n"
                "            pin_memory=torch.accelerator.is_available(),  # (fairseq_define) none: a warning\n",
            ),
            Edit(
                "                timeout=self.timeout,\n                pin_memory=True,\n",
                "                timeout=self.timeout,\n"
                "                pin_memory=torch.accelerator.is_available(),  # (fairseq_define) none: a warning\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/tasks/fairseq_task.py",
        "torch 2: torch.amp.autocast('cuda'), not the deprecated torch.cuda.amp.autocast (a warning each step)",
        (
            Edit(
                "            with torch.cuda.amp.autocast(enabled=(isinstance(optimizer, AMPOptimizer))):\n",
                '            with torch.amp.autocast("cuda", enabled=(isinstance(optimizer, AMPOptimizer))):\n',
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/optim/amp_optimizer.py",
        "torch 2: torch.amp.GradScaler('cuda'), not the deprecated torch.cuda.amp.GradScaler",
        (
            Edit(
                "        self._grad_scaler = torch.cuda.amp.GradScaler(**amp_kwargs)\n",
                '        self._grad_scaler = torch.amp.GradScaler("cuda", **amp_kwargs)\n',
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/modules/multihead_attention.py",
        "torch 2: a boolean padding mask beside a float attention mask made float first (a warning)",
        (
            # inline, not a call: TorchScript compiles this forward (fairseq's export tests)
            insert_before(
                "                return F.multi_head_attention_forward(\n",
                "                if key_padding_mask is not None and attn_mask is not None and key_padding_mask.dtype "
                "== torch.bool \\\n"
                "                        and attn_mask.is_floating_point():  # (fairseq_define) as torch makes it\n"
                "                    key_padding_mask = torch.zeros_like(key_padding_mask, "
                "dtype=attn_mask.dtype).masked_fill_(\n"
                '                        key_padding_mask, float("-inf"))\n',
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/models/transformer/transformer_encoder.py",
        "torch 2: the fast path's nested tensor without torch's prototype notice (every generate)",
        (
            # TorchScript compiles this forward: the scripted branch keeps torch's own call
            insert_after(
                "from fairseq.modules.checkpoint_activations import checkpoint_wrapper\n",
                "from fairseq._define_runtime.torch_warnings import nested_tensor_from_mask  # (fairseq_define)\n",
            ),
            Edit(
                "                        x = torch._nested_tensor_from_mask(\n"
                "                            x, encoder_padding_mask.logical_not()\n"
                "                        )\n",
                "                        if torch.jit.is_scripting():\n"
                "                            x = torch._nested_tensor_from_mask(x, "
                "encoder_padding_mask.logical_not())\n"
                "                        else:  # (fairseq_define) no prototype notice: not the user's to act on\n"
                "                            x = nested_tensor_from_mask(x, encoder_padding_mask.logical_not())\n",
            ),
        ),
    ),
)

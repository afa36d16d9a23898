"""LayerDrop pruning renumbers only the encoder's and decoder's own layers: a DeFINE unit's
``layers.N`` inside the embedding, and a stack that is not pruned, are kept."""

from ..edits import CopiedModule, Edit, FilePatch, replace_span

# The pruning is runtime/layer_pruning.py (copied into fairseq).
COPIES = (CopiedModule("layer_pruning", "LayerDrop pruning of the encoder's and decoder's own layers"),)

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/checkpoint_utils.py",
        "LayerDrop pruning: only the stacks' own layers (a unit's layers.N and an unpruned stack were dropped)",
        (
            replace_span(
                "    def create_pruning_pass(layers_to_keep, layer_name):\n",
                "                new_state_dict[new_state_key] = state_dict[layer_name]\n",
                "    from fairseq._define_runtime.layer_pruning import pruned_state_dict  # (fairseq_define)\n\n"
                "    new_state_dict = pruned_state_dict(state_dict, encoder_layers_to_keep, decoder_layers_to_keep)\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/models/transformer/transformer_legacy.py",
        "--encoder/decoder-layers-to-keep at training: one line naming --model-overrides at inference, not an "
        "AttributeError",
        (
            Edit(
                "            args.encoder_layers = len(args.encoder_layers_to_keep.split(\",\"))\n",
                "            from fairseq._define_runtime.layer_pruning import kept_layer_count  # (fairseq_define) "
                "checked\n\n"
                "            args.encoder_layers = kept_layer_count(args.encoder_layers_to_keep, \"encoder\")\n",
            ),
            Edit(
                "            args.decoder_layers = len(args.decoder_layers_to_keep.split(\",\"))\n",
                "            from fairseq._define_runtime.layer_pruning import kept_layer_count  # (fairseq_define) "
                "checked\n\n"
                "            args.decoder_layers = kept_layer_count(args.decoder_layers_to_keep, \"decoder\")\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/models/transformer/transformer_base.py",
        "--encoder/decoder-layers-to-keep at training: one line naming --model-overrides at inference, not an "
        "AttributeError",
        (
            Edit(
                "            cfg.encoder.layers = len(cfg.encoder.layers_to_keep.split(\",\"))\n",
                "            from fairseq._define_runtime.layer_pruning import kept_layer_count  # (fairseq_define) "
                "checked\n\n"
                "            cfg.encoder.layers = kept_layer_count(cfg.encoder.layers_to_keep, \"encoder\")\n",
            ),
            Edit(
                "            cfg.decoder.layers = len(cfg.decoder.layers_to_keep.split(\",\"))\n",
                "            from fairseq._define_runtime.layer_pruning import kept_layer_count  # (fairseq_define) "
                "checked\n\n"
                "            cfg.decoder.layers = kept_layer_count(cfg.decoder.layers_to_keep, \"decoder\")\n",
            ),
        ),
    ),
)

"""Hardening: bad input gets one line naming the problem and the fix (fairseq.UserError, one
hook), untrusted files (checkpoints, config strings, hub archives) cannot run code or
exhaust memory, and writes are atomic. Each module is one fix: its reason and its edits in
every file it touches; the code it adds is a module of ``runtime/`` (CopiedModule)."""

from . import (
    adaptive_bands,
    batch_sizes,
    checkpoint_loading,
    checkpoint_writes,
    config_literals,
    dataset_files,
    dictionary_files,
    eval_lm_settings,
    generation_inputs,
    generation_processes,
    hub_archives,
    inference_precision,
    layer_pruning,
    model_budget,
    model_overrides,
    model_shapes,
    output_links,
    plugin_loading,
    preprocess_inputs,
    resumed_optimizer,
    training_settings,
    user_error,
)

# the order in which a file's edits are applied (edits.one_patch_per_file)
GROUPS = (
    user_error,
    plugin_loading,
    checkpoint_loading,
    checkpoint_writes,
    config_literals,
    model_overrides,
    training_settings,
    preprocess_inputs,
    resumed_optimizer,
    dataset_files,
    generation_inputs,
    generation_processes,
    hub_archives,
    inference_precision,
    layer_pruning,
    model_budget,
    model_shapes,
    batch_sizes,
    dictionary_files,
    output_links,
    eval_lm_settings,
    adaptive_bands,
)
PATCHES = sum((group.PATCHES for group in GROUPS), ())
# the runtime modules (CopiedModule) that the fixes' edits import
COPIES = sum((getattr(group, "COPIES", ()) for group in GROUPS), ())

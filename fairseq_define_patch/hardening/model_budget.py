"""A budget before any model is built: fairseq's sizes bounded, adaptive factors at least 1,
and the parameters and position tables estimated and held to a limit
(FAIRSEQ_DEFINE_MAX_PARAMETERS raises it), whatever the config came from: the command line,
--model-overrides or a checkpoint's stored config (docs/checkpoints.md)."""

from ..edits import CopiedModule, Edit, FilePatch

# The checks are runtime/model_budget.py (copied into fairseq); models.build_model, through
# which the trainer, every tool and the hub build their models, calls them once the
# architecture's defaults are filled in.
COPIES = (CopiedModule("model_budget", "a model's sizes bounded and its parameters estimated before it is built"),)

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/models/__init__.py",
        "a model's sizes and estimated parameters checked before it is built",
        (
            Edit(
                "    return model.build_model(cfg, task)\n",
                "    from fairseq._define_runtime.model_budget import check_model_budget  # (fairseq_define)\n\n"
                "    return model.build_model(check_model_budget(cfg, task), task)\n",
            ),
        ),
    ),
)

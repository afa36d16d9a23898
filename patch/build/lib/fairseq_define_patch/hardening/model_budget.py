"""A budget before any model is built: fairseq's sizes bounded, adaptive factors at least 1,
and the parameters and position tables counted and held to a limit
(--max-model-parameters or FAIRSEQ_DEFINE_MAX_PARAMETERS raises it), whatever the config came
from: the command line, --model-overrides or a checkpoint's stored config
(docs/checkpoints.md)."""

from ..edits import CopiedModule, Edit, FilePatch, insert_before

# The checks are runtime/model_budget.py, the bounds runtime/size_bounds.py (both copied into
# fairseq); models.build_model, through which the trainer, every tool and the hub build their
# models, calls them once the architecture's defaults are filled in.
COPIES = (
    CopiedModule("size_bounds", "the one table of size bounds, fairseq's and the plugin's"),
    CopiedModule("model_budget", "a model's sizes bounded and its parameters counted before it is built"),
)

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
    # every CLI that builds a model parses its options here (train, generate, interactive,
    # eval-lm, validate): the limit's option joins the parser before the first parse
    FilePatch(
        "fairseq",
        "fairseq/options.py",
        "--max-model-parameters: the model budget's limit on the command line",
        (
            insert_before(
                "    if modify_parser is not None:\n        modify_parser(parser)\n\n"
                "    # The parser doesn't know about model/criterion/optimizer-specific args, so\n",
                "    from fairseq._define_runtime.model_budget import add_parameter_limit  # (fairseq_define)\n\n"
                "    add_parameter_limit(parser, input_args)  # --max-model-parameters\n",
            ),
        ),
    ),
)

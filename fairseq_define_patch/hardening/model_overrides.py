"""--model-overrides: parsed as plain data, checked by name against the checkpoint's config
and model; a model option the stored config lacks is set, not dropped."""

from ..edits import CopiedModule, Edit, FilePatch

# The code is runtime/model_overrides.py (copied into fairseq): checkpoint_utils sets a missing
# model option where it applies the overrides; each tool checks the names after loading.
COPIES = (CopiedModule("model_overrides", "--model-overrides checked by name; missing model options set"),)

_CHECK_OVERRIDES_CALL = (
    "    from fairseq._define_runtime.model_overrides import check_model_overrides  # (fairseq_define)\n\n"
    "    check_model_overrides({}, {})\n"
)

# fairseq-generate and fairseq-interactive read the string the same way
_PARSE_OVERRIDES = Edit(
    "    overrides = ast.literal_eval(cfg.common_eval.model_overrides)\n",
    "    overrides = utils.parse_config_literal(cfg.common_eval.model_overrides)\n",
)


def _check_overrides_after(anchor, overrides, cfg):
    """The check, inserted after load_model_ensemble's call, before ``anchor``."""
    shards = "        num_shards=cfg.checkpoint.checkpoint_shard_count,\n    )\n"
    return Edit(shards + "\n" + anchor, shards + _CHECK_OVERRIDES_CALL.format(overrides, cfg) + "\n" + anchor)


PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/checkpoint_utils.py",
        "--model-overrides: a model option the stored config lacks is set, an unknown name refused",
        (
            Edit(
                "from fairseq.models import FairseqDecoder, FairseqEncoder\nfrom omegaconf import",
                "from fairseq.models import FairseqDecoder, FairseqEncoder\n"
                "from fairseq._define_runtime.model_overrides import _set_missing_model_options  # (fairseq_define)\n"
                "from omegaconf import",
            ),
            Edit(
                '            overwrite_args_by_name(state["cfg"], arg_overrides)\n\n',
                '            overwrite_args_by_name(state["cfg"], arg_overrides)\n'
                '            _set_missing_model_options(state["cfg"], arg_overrides)  # (fairseq_define)\n\n',
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq_cli/generate.py",
        "--model-overrides parsed as plain data (one line for a malformed string) and checked by name",
        (
            _PARSE_OVERRIDES,
            _check_overrides_after("    # loading the dataset should happen after", "overrides", "saved_cfg"),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq_cli/interactive.py",
        "--model-overrides parsed as plain data (one line for a malformed string) and checked by name",
        (
            _PARSE_OVERRIDES,
            _check_overrides_after("    # Set dictionaries\n", "overrides", "_model_args"),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq_cli/eval_lm.py",
        "--model-overrides checked by name",
        (
            Edit(
                "    models, model_args, task = checkpoint_utils.load_model_ensemble_and_task(\n"
                "        [cfg.common_eval.path],\n"
                "        arg_overrides=eval(cfg.common_eval.model_overrides),\n",
                "    overrides = eval(cfg.common_eval.model_overrides)\n"
                "    models, model_args, task = checkpoint_utils.load_model_ensemble_and_task(\n"
                "        [cfg.common_eval.path],\n"
                "        arg_overrides=overrides,\n",
            ),
            Edit(
                "        task=task,\n"
                "    )\n"
                "\n"
                "    use_fp16 = cfg.common.fp16\n",
                "        task=task,\n"
                "    )\n"
                + _CHECK_OVERRIDES_CALL.format("overrides", "model_args")
                + "\n"
                "    use_fp16 = cfg.common.fp16\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq_cli/validate.py",
        "--model-overrides checked by name",
        (
            Edit(
                "        overrides = vars(override_args)\n"
                '        overrides.update(eval(getattr(override_args, "model_overrides", "{}")))\n'
                "    else:\n"
                "        overrides = None\n",
                "        overrides = vars(override_args)\n"
                '        user_overrides = eval(getattr(override_args, "model_overrides", "{}"))\n'
                "        overrides.update(user_overrides)\n"
                "    else:\n"
                "        overrides = user_overrides = None\n",
            ),
            Edit(
                "        suffix=cfg.checkpoint.checkpoint_suffix,\n"
                "    )\n"
                "    model = models[0]\n",
                "        suffix=cfg.checkpoint.checkpoint_suffix,\n"
                "    )\n"
                + _CHECK_OVERRIDES_CALL.format("user_overrides", "saved_cfg")
                + "    model = models[0]\n",
            ),
        ),
    ),
)

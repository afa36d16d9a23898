"""--model-overrides: parsed as plain data, checked by name against the checkpoint's config
and model; a model option the stored config lacks is set, not dropped; keys that are no name,
a nested group ({'model': {...}}) and a model setting's value of another kind are checked
before anything is applied (a nested group is applied as its names)."""

from ..edits import CopiedModule, Edit, FilePatch, insert_after, insert_before

# The code is runtime/model_overrides.py (copied into fairseq): checkpoint_utils sets a missing
# model option where it applies the overrides; each tool checks the names after loading.
COPIES = (CopiedModule("model_overrides", "--model-overrides checked by name; missing model options set"),)

_CHECK_OVERRIDES_CALL = (
    "    from fairseq._define_runtime.model_overrides import check_model_overrides  # (fairseq_define)\n"
    "    check_model_overrides({}, {})\n"
)

# fairseq-generate and fairseq-interactive read the string the same way
_PARSE_OVERRIDES = Edit(
    "    overrides = ast.literal_eval(cfg.common_eval.model_overrides)\n",
    "    overrides = utils.parse_config_literal(cfg.common_eval.model_overrides)\n",
)


def _check_overrides_after(anchor, overrides, cfg):
    """The check, inserted after load_model_ensemble's call, before ``anchor``."""
    return insert_before("\n" + anchor, _CHECK_OVERRIDES_CALL.format(overrides, cfg))


PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/checkpoint_utils.py",
        "--model-overrides: a model option the stored config lacks is set, an unknown name refused; "
        "keys, nested groups and value kinds checked before they are applied",
        (
            insert_after(
                "from fairseq.models import FairseqDecoder, FairseqEncoder\n",
                "from fairseq._define_runtime.model_overrides import (  # (fairseq_define)\n"
                "    _set_missing_model_options, checked_model_overrides,\n)\n",
            ),
            # before check_is_checkpoint (hardening/checkpoint_loading.py) reads the names
            insert_before(
                "    check_is_checkpoint(state, path, arg_overrides)  # (fairseq_define)\n",
                "    arg_overrides = checked_model_overrides(arg_overrides, state)  # (fairseq_define) keys, groups, "
                "kinds\n",
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
            insert_before(
                "\n    use_fp16 = cfg.common.fp16\n", _CHECK_OVERRIDES_CALL.format("overrides", "model_args")
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq_cli/validate.py",
        "--model-overrides checked by name",
        (
            Edit(
                '        overrides.update(eval(getattr(override_args, "model_overrides", "{}")))\n'
                "    else:\n        overrides = None\n",
                '        user_overrides = eval(getattr(override_args, "model_overrides", "{}"))\n'
                "        overrides.update(user_overrides)\n    else:\n        overrides = user_overrides = None\n",
            ),
            insert_before("    model = models[0]\n", _CHECK_OVERRIDES_CALL.format("user_overrides", "saved_cfg")),
        ),
    ),
)

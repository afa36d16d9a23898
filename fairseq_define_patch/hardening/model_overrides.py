"""--model-overrides: parsed as plain data, checked by name against the checkpoint's config
and model; a model option the stored config lacks is set, not dropped."""

from ..edits import Edit, FilePatch

# --model-overrides names settings by their option names; fairseq dropped a name that the
# checkpoint's stored config lacks without a word: a typo, or a model option added after the
# checkpoint was saved (whose override then did nothing). A model option the stored config
# lacks is now set; any other unknown name, or a string that is not a dict, gives one line.
_MODEL_OVERRIDES_HELPER = """

def _model_option_names(model_cfg):
    # (added by fairseq_define) the options of the model a stored config names: its
    # dataclass's fields, or what its add_args declares
    import argparse

    from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_REGISTRY

    name = getattr(model_cfg, "_name", None) or getattr(model_cfg, "arch", None)
    cls = ARCH_MODEL_REGISTRY.get(name) or MODEL_REGISTRY.get(name)
    if cls is None:
        return set()
    dc = getattr(cls, "__dataclass", None)
    if dc is not None:
        return set(dc.__dataclass_fields__)
    parser = argparse.ArgumentParser(add_help=False, conflict_handler="resolve")
    try:
        cls.add_args(parser)
    except Exception:  # a model whose add_args needs more than a parser: its stored keys only
        return set()
    return {a.dest for a in parser._actions}


def _config_keys(cfg):
    # the names in a config's groups; a group kept as a Namespace (a model without a
    # dataclass) took every override as an attribute, so its names come from its model
    known = set()
    nodes = [cfg]
    while nodes:
        node = nodes.pop()
        for key in node.keys():
            known.add(key)
            if key in node and isinstance(node[key], DictConfig):
                nodes.append(node[key])
    return known


def _set_missing_model_options(cfg, overrides):
    # (added by fairseq_define) an override of a model option that the stored config lacks
    # (saved before the option existed): set it, where fairseq dropped it
    model_cfg = cfg.get("model", None) if isinstance(cfg, DictConfig) else None
    if not isinstance(model_cfg, DictConfig):
        return
    missing = [k for k in overrides if k not in model_cfg]
    options = _model_option_names(model_cfg) if missing else set()
    with open_dict(model_cfg):
        for key in missing:
            if key in options:
                model_cfg[key] = overrides[key]


def check_model_overrides(overrides, cfg):
    \"\"\"(added by fairseq_define) Refuse --model-overrides names that are no setting of the
    loaded checkpoint's config (model, task, generation, ...), nor an option of its model.\"\"\"
    import difflib

    if not overrides or not isinstance(cfg, DictConfig):
        return
    known = _config_keys(cfg)
    model_cfg = cfg.get("model", None)
    if model_cfg is not None:
        known |= _model_option_names(model_cfg)
    unknown = [k for k in overrides if k not in known]
    if unknown:
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(str(key), sorted(map(str, known)), n=1)
            hints.append("{!r}{}".format(key, " (did you mean {!r}?)".format(close[0]) if close else ""))
        raise UserError(
            "--model-overrides: {} {} not a setting of this checkpoint's model, task or other "
            "config: use the option's name without -- and with _ for -, e.g. \\"{{'dropout': 0.0}}\\"".format(
                ", ".join(hints), "is" if len(unknown) == 1 else "are"
            )
        )

"""

_CHECK_OVERRIDES_CALL = (
    "    from fairseq.checkpoint_utils import check_model_overrides  # (fairseq_define)\n\n"
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
                '            overwrite_args_by_name(state["cfg"], arg_overrides)\n\n'
                "    state = _upgrade_state_dict(state)\n"
                "    return state\n\n\n",
                '            overwrite_args_by_name(state["cfg"], arg_overrides)\n'
                '            _set_missing_model_options(state["cfg"], arg_overrides)\n\n'
                "    try:  # (fairseq_define) a dict with a 'model' entry but not the rest: KeyError\n"
                "        state = _upgrade_state_dict(state)\n"
                "    except (KeyError, IndexError, TypeError, AttributeError) as e:\n"
                "        raise CheckpointLoadError(\n"
                '            "{} is not a complete fairseq checkpoint ({}: {}): give a checkpoint written by "\n'
                '            "fairseq-train (checkpoint_best.pt, checkpointN.pt)".format(path, type(e).__name__, e)\n'
                "        ) from None\n"
                "    return state\n" + _MODEL_OVERRIDES_HELPER + "\n",
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

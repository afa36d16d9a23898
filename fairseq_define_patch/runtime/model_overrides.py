"""--model-overrides: names checked against the checkpoint's config and model; a model option
the stored config lacks is set, not dropped.

--model-overrides names settings by their option names; fairseq dropped a name that the
checkpoint's stored config lacks without a word: a typo, or a model option added after the
checkpoint was saved (whose override then did nothing). fairseq/checkpoint_utils.py now calls
``_set_missing_model_options`` after it applies the overrides, and fairseq-generate,
-interactive, -eval-lm and -validate call ``check_model_overrides`` after loading: any other
unknown name gets one line, with the closest setting's name.
"""

from omegaconf import DictConfig, open_dict

from fairseq import UserError

__all__ = ["check_model_overrides", "_set_missing_model_options"]


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
    """(added by fairseq_define) Refuse --model-overrides names that are no setting of the
    loaded checkpoint's config (model, task, generation, ...), nor an option of its model."""
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
            "config: use the option's name without -- and with _ for -, e.g. \"{{'dropout': 0.0}}\"".format(
                ", ".join(hints), "is" if len(unknown) == 1 else "are"
            )
        )

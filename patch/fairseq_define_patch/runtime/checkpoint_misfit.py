"""One line for a resumed checkpoint whose weights do not fit the model this run built.

fairseq-train said only "please ensure that the architectures match": the user could not tell
which setting (an output layer's form, a layer count, the dictionary) made the difference. The
trainer (fairseq/trainer.py) now raises ``checkpoint_misfit(...)``: the model settings that
differ between the checkpoint's config and this run's, or, where none does, what the load
itself reported (a missing weight, a size mismatch). Settings that do not change what the
weights compute (dropout: checkpoint_fit.is_neutral_setting) are never named; a table whose
rows differ is put down to the dictionary; a weight the load's own check named
(checkpoint_weights.py: missing, extra, of another shape, not finite) gets the file's name.
``check_checkpoint_form`` (checkpoint_fit.py) runs
before the load, for a checkpoint whose shapes fit a model of another form.
"""

import argparse
import re
from argparse import Namespace

from fairseq import UserError
from omegaconf import OmegaConf

from .checkpoint_fit import check_checkpoint_form, is_neutral_setting
from .checkpoint_weights import CheckpointWeightsError

__all__ = ["check_checkpoint_form", "checkpoint_misfit"]


def checkpoint_misfit(filename, state, model_cfg, error):
    """The exception the trainer raises for ``error``, raised while loading the weights of
    ``state`` into the model built from ``model_cfg``: ``error`` itself when it is already a
    UserError, else a UserError with the line of _checkpoint_misfit (caused by ``error``)."""
    if isinstance(error, CheckpointWeightsError):  # the weights checked as they load: the file's name first
        line = (
            "checkpoint {} is damaged: {}; {}".format(filename, error.detail, error.fix) if error.damaged
            else "checkpoint {} does not fit this model: {}; resume with the checkpoint's settings and data "
            "(dict.*.txt), or train from scratch in a new --save-dir".format(filename, error.detail)
        )
        misfit = UserError(line)
    elif isinstance(error, UserError):
        return error
    else:
        misfit = UserError(_checkpoint_misfit(filename, state, model_cfg, error))
    misfit.__cause__ = error  # as `raise ... from error`
    return misfit


def _checkpoint_misfit(filename, state, model_cfg, error, limit=6):
    """(added by fairseq_define) One line for a checkpoint whose weights do not fit the model
    this run built: the model settings that differ from the checkpoint's, or the load's own
    first complaint, and the fix."""
    saved_cfg = (state.get("cfg") or {}).get("model") if isinstance(state, dict) else None
    if saved_cfg is None and isinstance(state, dict):
        saved_cfg = state.get("args")
    differ = _model_settings_that_differ(saved_cfg, model_cfg)
    if differ:
        more = len(differ) - limit
        why = "its model settings differ from this run's: {}{}".format(
            "; ".join(differ[:limit]), " and {} more".format(more) if more > 0 else ""
        )
    else:
        lines = [l.strip() for l in str(error).splitlines() if l.strip()]
        first = lines[1] if len(lines) > 1 and lines[0].startswith("Error(s) in loading") else (lines or [""])[0]
        why = _dictionary_misfit(str(error)) or "the same model settings, but {}".format(first[:300].rstrip(". "))
    return (
        "checkpoint {} does not fit this model: {}; resume with the checkpoint's settings and "
        "data (dict.*.txt), or train from scratch in a new --save-dir".format(filename, why)
    )


_SIZE_MISMATCH = re.compile(
    r"size mismatch for (\S+): copying a param with shape torch.Size\(\[([0-9, ]*)\]\) from "
    r"checkpoint, the shape in current model is torch.Size\(\[([0-9, ]*)\]\)"
)


def _dictionary_misfit(text):
    # (added by fairseq_define) a table whose rows differ and nothing else: another dictionary
    m = _SIZE_MISMATCH.search(text)
    if not m:
        return None
    saved, here = ([int(x) for x in g.split(",") if x.strip()] for g in m.group(2, 3))
    if len(saved) != len(here) or not saved or saved[0] == here[0] or saved[1:] != here[1:]:
        return None
    return (
        "{} has {:,} rows in the checkpoint but {:,} here: this run's dictionary (dict.*.txt) differs from the one "
        "it was trained with"
    ).format(
        m.group(1), saved[0], here[0]
    )


def _model_settings_that_differ(saved_cfg, model_cfg):
    """(added by fairseq_define) ["--flag A in the checkpoint, B here", ...] over the model's
    own settings (its add_args), in the order the model declares them."""
    from fairseq import models  # imported by the trainer before it loads a checkpoint

    def settings(cfg):
        if isinstance(cfg, Namespace):
            return dict(vars(cfg))
        try:
            return dict(OmegaConf.to_container(cfg, resolve=False)) if cfg is not None else {}
        except Exception:
            return {}

    saved, here = settings(saved_cfg), settings(model_cfg)
    names = sorted(set(saved) | set(here))  # an unknown model: every setting
    model_class = models.ARCH_MODEL_REGISTRY.get(here.get("arch") or here.get("_name"))
    if model_class is not None:
        parser = argparse.ArgumentParser(add_help=False, conflict_handler="resolve")
        try:
            model_class.add_args(parser)
            names = ["arch"] + [a.dest for a in parser._actions if a.dest != "arch"]
        except Exception:  # a model whose options need more than a parser: every setting
            pass
    saved_arch, here_arch = (s.get("_name") or s.get("arch") for s in (saved, here))
    differ = ["--arch {} in the checkpoint, {} here".format(saved_arch, here_arch)] if (
        saved_arch and here_arch and models.ARCH_MODEL_REGISTRY.get(saved_arch) is not model_class
    ) else []
    return differ + [
        "--{} {} in the checkpoint, {} here".format(
            name.replace("_", "-"), saved.get(name, "unset"), here.get(name, "unset")
        )
        for name in names
        if saved.get(name) != here.get(name) and not is_neutral_setting(name)
    ]

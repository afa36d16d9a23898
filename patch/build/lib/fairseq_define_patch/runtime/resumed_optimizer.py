"""A resumed optimizer runs with the command's settings (betas, eps, weight decay, momentum),
as fairseq meant and as the checkpoint it saves next records.

fairseq's FairseqOptimizer.load_state_dict says it prefers "the configuration of the existing
optimizer instance ... over that found in the state_dict", so that training resumes "using a
new set of optimizer args", and each optimizer's ``optimizer_config`` is documented as the
settings that "override optimizer args stored in checkpoints"; but fairseq 0.12.2 no longer
applied it: torch's Optimizer.load_state_dict put back the checkpoint's settings, so resuming
with --weight-decay 0.1, --adam-betas or --adam-eps kept the old ones while the new checkpoint
stored the new ones as applied. fairseq/optim/fairseq_optimizer.py loads the state through
``load_with_command_settings``: the moments come from the checkpoint, the settings from the command (a
changed one is logged); the learning rate stays the scheduler's, which sets it on every
update, and --optimizer-overrides still applies after.
"""

import logging

__all__ = ["load_with_command_settings"]

logger = logging.getLogger(__name__)


def load_with_command_settings(optimizer, state_dict):
    """Load a checkpoint's ``state_dict`` into ``optimizer`` (a FairseqOptimizer): each parameter
    group keeps the values its ``optimizer_config`` names, but the learning rate."""
    names = [k for k in optimizer.optimizer_config if k != "lr"]
    given = [{k: group[k] for k in names if k in group} for group in optimizer.param_groups]
    optimizer.optimizer.load_state_dict(state_dict)
    changed = {}
    for group, settings in zip(optimizer.param_groups, given):
        for name, value in settings.items():
            if not _same(group.get(name), value):
                changed.setdefault(name, (group.get(name), value))
            group[name] = value
    for name, (stored, value) in sorted(changed.items()):
        logger.info("resuming with this command's %s %s (the checkpoint's optimizer ran with %s); "
                    "its moments are kept", name, _shown(value), _shown(stored))


def _same(a, b):
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return tuple(a) == tuple(b)
    return a == b


def _shown(value):
    return tuple(value) if isinstance(value, list) else value

"""The trigger of NT-ASGD (Merity et al. 2018, section 3): a constant learning rate, and
averaging starts once the validation loss is worse than the best of all but the last
``--nonmono`` validations (AWD-LSTM: 5). ``--nonmono 0`` averages from the first validation
on (AWD-LSTM's fine-tuning stage). Needs ``--optimizer nt_asgd``."""

import logging
from dataclasses import dataclass, field
from typing import List

from fairseq.dataclass import FairseqDataclass
from fairseq.optim.lr_scheduler import FairseqLRScheduler, register_lr_scheduler
from omegaconf import II

from ..errors import UserError
from .nt_asgd import FairseqNTASGD

logger = logging.getLogger(__name__)


@dataclass
class NTASGDScheduleConfig(FairseqDataclass):
    nonmono: int = field(
        default=5,
        metadata={
            "help": "start averaging when the validation loss is worse than the best before the last NONMONO "
            "validations; 0: at the first validation"
        },
    )
    lr: List[float] = II("optimization.lr")


@register_lr_scheduler("nt_asgd", dataclass=NTASGDScheduleConfig)
class NTASGDSchedule(FairseqLRScheduler):
    def __init__(self, cfg: NTASGDScheduleConfig, optimizer):
        super().__init__(cfg, optimizer)
        if not isinstance(optimizer, FairseqNTASGD):
            raise UserError(
                f"--lr-scheduler nt_asgd switches the optimizer to averaging and needs "
                f"--optimizer nt_asgd (got {type(optimizer).__name__})"
            )
        if cfg.nonmono < 0:
            raise UserError(f"--nonmono must be 0 or more, got {cfg.nonmono}")
        self.history: List[float] = []
        self.optimizer.set_lr(cfg.lr[0])

    def state_dict(self):
        return {"best": self.best, "history": list(self.history)}

    def load_state_dict(self, state_dict):
        self.best = state_dict.get("best")
        self.history = list(state_dict.get("history", []))

    def step(self, epoch, val_loss=None):
        super().step(epoch, val_loss)
        inner = self.optimizer.optimizer  # the AveragedSGD
        if val_loss is not None and inner.averaging and not inner.validated_average \
                and any(g["averaged_steps"] for g in inner.param_groups):
            logger.warning(
                "NT-ASGD is averaging, but this validation (and the checkpoint saved after it) "
                "used the SGD iterate: the averaged weights are swapped in by --task contiguous_lm"
            )
        inner.validated_average = False
        if val_loss is not None:
            k = self.cfg.nonmono
            stalled = k == 0 or (len(self.history) > k and val_loss > min(self.history[:-k]))
            if stalled and not self.optimizer.averaging:
                logger.info("epoch %d: validation loss %.4f, best before the last %d: %s; "
                            "switching to averaged SGD", epoch, val_loss, k,
                            f"{min(self.history[:-k]):.4f}" if k else "-")
                self.optimizer.start_averaging()
            self.history.append(float(val_loss))
        return self.optimizer.get_lr()

    def step_update(self, num_updates):
        return self.optimizer.get_lr()

"""Non-monotonically triggered averaged SGD (NT-ASGD; Merity et al. 2018, section 3), the
optimizer AWD-LSTM trains with and so the one behind the paper's Table 1c ("the same
hyper-parameters ... as the original AWD-LSTM", section 4.1.2). fairseq has no equivalent.

``--optimizer nt_asgd`` runs plain SGD until ``--lr-scheduler nt_asgd`` sees the validation
loss fail to improve on the best of all but the last ``--nonmono`` epochs; from then on it
also keeps the running mean of the iterates (ASGD with t0 = 0 and no decay, as AWD-LSTM).

Validation and the checkpoints written after it use the averaged weights, as AWD-LSTM
evaluates and saves them: ``begin_validation`` swaps them in, and this optimizer swaps the
SGD iterate back before the next training step (``zero_grad``, which fairseq calls before
every training forward). fairseq tells no optimizer that validation begins, and gives the
task its optimizer only in ``train_step``: ``--task contiguous_lm`` keeps the optimizer of
its last training step and calls its ``begin_validation``, if it has one, at the start of
each validation. The iterate and the average are both in the optimizer state, so a resumed
run continues from the same point.
Two consequences of fairseq's order of events: a checkpoint written without validation
(``--disable-validation``, or a save interval shorter than the validation interval) holds
the iterate; and fairseq steps the schedule after saving and not after a run's last epoch,
so the trigger never sees the last validation of a run that stopped at ``--max-epoch``
(a resumed run decides from the validations before it).
"""

import logging
from dataclasses import dataclass, field
from typing import List

import torch
from fairseq.dataclass import FairseqDataclass
from fairseq.optim import FairseqOptimizer, register_optimizer
from omegaconf import II

from ..errors import UserError

logger = logging.getLogger(__name__)


class AveragedSGD(torch.optim.Optimizer):
    """SGD whose ``start_averaging`` begins a uniform running mean of the iterates that
    follow (torch's ASGD with t0 = 0 and lambd = 0, as AWD-LSTM runs it).

    State: per parameter ``average`` (the mean) and, while the average is swapped into the
    parameters, ``iterate`` (the SGD point training continues from); per group
    ``averaging``, ``averaged_steps`` (iterates in the mean) and ``swapped``."""

    def __init__(self, params, lr: float, weight_decay: float = 0.0):
        defaults = dict(lr=lr, weight_decay=weight_decay, averaging=False, averaged_steps=0, swapped=False)
        super().__init__(params, defaults)
        # set by ``use_average``, cleared by the schedule after each validation: did the
        # validation that just ended use the average?
        self.validated_average = False

    @property
    def averaging(self) -> bool:
        return bool(self.param_groups[0]["averaging"])

    def start_averaging(self) -> None:
        """Switch to ASGD: the mean starts with the next iterate."""
        for group in self.param_groups:
            group["averaging"] = True

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        self.use_iterate()
        for group in self.param_groups:
            lr, wd = group["lr"], group["weight_decay"]
            if group["averaging"]:
                group["averaged_steps"] += 1
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.add_(p.grad + wd * p if wd else p.grad, alpha=-lr)
                if group["averaging"]:
                    state = self.state[p]
                    if "average" not in state:
                        state["average"] = p.detach().clone()
                    else:
                        avg = state["average"]
                        avg.add_(p - avg, alpha=1.0 / group["averaged_steps"])  # mean of the iterates
        return loss

    @torch.no_grad()
    def use_average(self) -> bool:
        """Put the averaged weights into the parameters (the iterate is kept); False while
        still in the SGD phase."""
        if not any(g["averaged_steps"] for g in self.param_groups):
            return False
        for group in self.param_groups:
            if group["swapped"]:
                continue
            for p in group["params"]:
                state = self.state[p]
                if "average" not in state:  # a parameter that has had no gradient yet
                    continue
                state["iterate"] = p.detach().clone()
                p.copy_(state["average"])
            group["swapped"] = True
        self.validated_average = True
        return True

    @torch.no_grad()
    def use_iterate(self) -> None:
        """Undo ``use_average`` (also after resuming from a checkpoint saved while swapped)."""
        for group in self.param_groups:
            if not group["swapped"]:
                continue
            for p in group["params"]:
                if "iterate" in self.state[p]:
                    p.copy_(self.state[p].pop("iterate"))
            group["swapped"] = False


@dataclass
class NTASGDConfig(FairseqDataclass):
    weight_decay: float = field(default=1.2e-6, metadata={"help": "L2 weight decay (AWD-LSTM: 1.2e-6)"})
    lr: List[float] = II("optimization.lr")
    fp16: bool = II("common.fp16")
    bf16: bool = II("common.bf16")
    amp: bool = II("common.amp")
    use_bmuf: bool = II("optimization.use_bmuf")
    zero_sharding: str = II("distributed_training.zero_sharding")
    ddp_backend: str = II("distributed_training.ddp_backend")


@register_optimizer("nt_asgd", dataclass=NTASGDConfig)
class FairseqNTASGD(FairseqOptimizer):
    def __init__(self, cfg: NTASGDConfig, params):
        super().__init__(cfg)
        if cfg.fp16 or cfg.bf16 or cfg.amp:
            raise UserError(
                "--optimizer nt_asgd trains in float32 (as AWD-LSTM): drop --fp16/--bf16/--amp, "
                "or use --optimizer sgd"
            )
        if cfg.use_bmuf or str(cfg.zero_sharding) != "none" or str(cfg.ddp_backend) == "fully_sharded":
            raise UserError(
                "--optimizer nt_asgd keeps the average of every parameter in one optimizer: it "
                "works with data-parallel training (pytorch_ddp, legacy_ddp, c10d), not with "
                "--use-bmuf, --zero-sharding or --ddp-backend fully_sharded"
            )
        self._optimizer = AveragedSGD(params, **self.optimizer_config)

    @property
    def optimizer_config(self):
        return {"lr": self.cfg.lr[0], "weight_decay": self.cfg.weight_decay}

    @property
    def supports_flat_params(self):
        return False

    def zero_grad(self):
        # fairseq calls this before every training forward: train from the SGD iterate
        self._optimizer.use_iterate()
        super().zero_grad()

    def start_averaging(self) -> None:
        self._optimizer.start_averaging()

    def begin_validation(self) -> bool:
        """Validate (and save) the averaged weights, once averaging has begun; True if swapped in."""
        if self._optimizer.use_average():
            logger.info("validating the averaged (NT-ASGD) weights")
            return True
        return False

    @property
    def averaging(self) -> bool:
        return self._optimizer.averaging

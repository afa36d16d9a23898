"""NT-ASGD's non-monotone trigger at its boundaries (Merity et al. 2018, Algorithm 1; the
reference code switches when ``t > nonmono and val_loss > min(best_val_loss[:-nonmono])``)."""

import pytest
import torch

from fairseq_define.optim.nt_asgd import FairseqNTASGD, NTASGDConfig
from fairseq_define.optim.nt_asgd_schedule import NTASGDSchedule, NTASGDScheduleConfig


def schedule(nonmono):
    w = torch.nn.Parameter(torch.randn(3))
    opt = FairseqNTASGD(NTASGDConfig(weight_decay=0.0, lr=[1.0], fp16=False, bf16=False, amp=False, use_bmuf=False,
                                     zero_sharding="none", ddp_backend="pytorch_ddp"), [w])
    return NTASGDSchedule(NTASGDScheduleConfig(nonmono=nonmono, lr=[1.0]), opt), opt


def switch_epoch(nonmono, losses):
    """The first epoch whose validation switches to averaging, or None."""
    sched, opt = schedule(nonmono)
    for epoch, loss in enumerate(losses, 1):
        sched.step(epoch, loss)
        if opt.averaging:
            return epoch
    return None


@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_loss_equal_to_the_windows_best_does_not_switch(k):
    # the best (1.0) is the first loss; every later one ties it
    assert switch_epoch(k, [1.0] * (k + 4)) is None


@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_worse_loss_switches_as_soon_as_the_window_has_an_earlier_loss(k):
    # k+1 losses on record are the fewest that leave one before the last k: the (k+2)-th
    # validation is the first that can switch, and a worse one does
    losses = [1.0] + [0.5] * k + [1.0 + 1e-6]
    assert switch_epoch(k, losses) == k + 2
    # with one loss fewer on record nothing lies before the window: no switch
    assert switch_epoch(k, [1.0] + [0.5] * (k - 1) + [2.0]) is None


def test_nonmono_zero_switches_at_the_first_validation():
    assert switch_epoch(0, [3.0]) == 1

"""AWD-LSTM's training loss (Merity et al. 2018, section 4.6; the paper's Table 1c trains
AWD-LSTM + DeFINE with its hyper-parameters): negative log-likelihood through the tied
(adaptive) softmax plus activation regularization (AR) on the last LSTM layer's dropped
output and temporal activation regularization (TAR) on its raw output.

AR and TAR are means over tokens in AWD-LSTM, where the NLL is a mean too; fairseq sums the
loss and divides the gradient by the number of tokens, so both are scaled by it here. The
logged ``loss`` and ``ppl`` are the NLL alone; ``ar`` and ``tar`` are logged beside them.
"""

from dataclasses import dataclass, field

import torch
from fairseq import metrics
from fairseq.criterions import register_criterion
from fairseq.criterions.cross_entropy import CrossEntropyCriterionConfig

from ..errors import UserError
from .projected_adaptive_loss import ProjectedAdaptiveLoss


@dataclass
class AWDLanguageModelLossConfig(CrossEntropyCriterionConfig):
    alpha: float = field(
        default=2.0, metadata={"help": "AR: weight of mean(h_t^2) of the last layer's dropped output (AWD-LSTM: 2)"}
    )
    beta: float = field(
        default=1.0,
        metadata={"help": "TAR: weight of mean((h_t - h_{t-1})^2) of the last layer's raw output (AWD-LSTM: 1)"},
    )


@register_criterion("awd_lm_loss", dataclass=AWDLanguageModelLossConfig)
class AWDLanguageModelLoss(ProjectedAdaptiveLoss):
    def __init__(self, task, sentence_avg, alpha, beta):
        super().__init__(task, sentence_avg)
        if alpha < 0 or beta < 0:
            raise UserError(f"--alpha and --beta must be >= 0, got {alpha} and {beta}")
        self.alpha, self.beta = alpha, beta

    def forward(self, model, sample, reduce=True):
        net_output = model(**sample["net_input"])
        nll, _ = self.compute_loss(model, net_output, sample, reduce=reduce)
        ntokens = sample["ntokens"]
        ar = tar = nll.new_zeros((), dtype=torch.float32)
        raw = net_output[1].get("raw_output") if isinstance(net_output[1], dict) else None
        if model.training and (self.alpha > 0 or self.beta > 0):
            if raw is None:
                raise UserError(
                    "--criterion awd_lm_loss needs a model that returns its last layer's raw "
                    "output (--arch define_lstm_* / define_awd_lstm_*); use "
                    "--criterion projected_adaptive_loss for this model"
                )
            # in float32: sums over a batch overflow half precision
            raw, out = raw.float(), net_output[0].float()
            keep = sample["target"].ne(self.padding_idx).unsqueeze(-1).float()  # [B, T, 1]
            width = raw.size(-1)
            count = keep.sum().clamp(min=1) * width
            if self.alpha > 0:
                ar = self.alpha * (out.pow(2) * keep).sum() / count
            if self.beta > 0 and raw.size(1) > 1:
                both = keep[:, 1:] * keep[:, :-1]  # [B, T-1, 1]
                pairs = (both.sum() * width).clamp(min=1)
                tar = self.beta * ((raw[:, 1:] - raw[:, :-1]).pow(2) * both).sum() / pairs
        loss = nll + ((ar + tar) * ntokens).to(nll.dtype)
        sample_size = sample["target"].size(0) if self.sentence_avg else ntokens
        logging_output = {
            "loss": nll.data,
            "ar": ar.data * ntokens,
            "tar": tar.data * ntokens,
            "ntokens": ntokens,
            "nsentences": sample["target"].size(0),
            "sample_size": sample_size,
        }
        return loss, sample_size, logging_output

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)
        ntokens = sum(log.get("ntokens", 0) for log in logging_outputs)
        for key in ("ar", "tar"):
            total = sum(float(log.get(key, 0)) for log in logging_outputs)
            metrics.log_scalar(key, total / max(ntokens, 1), ntokens, round=4)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True


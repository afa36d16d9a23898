"""Negative log-likelihood through a projected adaptive softmax, computed for the target
tokens only (the full vocabulary is never normalised in training)."""

from fairseq.criterions import register_criterion
from fairseq.criterions.cross_entropy import CrossEntropyCriterion, CrossEntropyCriterionConfig

from ..errors import UserError


@register_criterion("projected_adaptive_loss", dataclass=CrossEntropyCriterionConfig)
class ProjectedAdaptiveLoss(CrossEntropyCriterion):
    """Same logging and metrics as fairseq's cross_entropy (loss in base 2, ppl)."""

    def compute_loss(self, model, net_output, sample, reduce=True):
        softmax = getattr(model.decoder, "adaptive_softmax", None)
        if softmax is None or not hasattr(softmax, "target_log_prob"):
            raise UserError(
                "--criterion projected_adaptive_loss needs a model with a projected adaptive "
                "softmax (--arch define_txl_* or define_lstm_*); use --criterion cross_entropy for this model"
            )
        hidden = net_output[0]  # [B, T, d]
        target = model.get_targets(sample, net_output)  # [B, T]
        keep = target.ne(self.padding_idx)  # [B, T]
        nll = -softmax.target_log_prob(hidden[keep], target[keep])  # [N]
        if reduce:
            nll = nll.sum()
        return nll, nll

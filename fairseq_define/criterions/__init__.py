from . import awd_lm_loss, projected_adaptive_loss  # noqa: F401  (registers the criteria)

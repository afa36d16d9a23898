from . import projected_adaptive_loss  # noqa: F401  (registers the criterion)

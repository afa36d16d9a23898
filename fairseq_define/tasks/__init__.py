from . import contiguous_lm  # noqa: F401  (registers the task)

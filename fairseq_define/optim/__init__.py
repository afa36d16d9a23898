from . import nt_asgd, nt_asgd_schedule  # noqa: F401  (registers the optimizer and its schedule)

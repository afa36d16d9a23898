from . import define_transformer  # noqa: F401  (registers the models and architectures)

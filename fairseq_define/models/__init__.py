from . import define_transformer, transformer_xl  # noqa: F401  (registers the models and architectures)

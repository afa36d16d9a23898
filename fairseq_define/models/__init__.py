from . import define_transformer, lstm_lm, transformer_xl  # noqa: F401  (registers the models and architectures)

from . import define_transformer, define_transformer_lm, lstm_lm, transformer_xl  # noqa: F401  (registers the models and architectures)

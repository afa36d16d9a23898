"""LSTM language models with DeFINE (paper section 4.1): the 4-layer LSTM of Table 1a and
the ablations of Tables 6-8 on WikiText-103, and AWD-LSTM + DeFINE on PTB (Table 1c).

Token -> map (standard n-dim table, or adaptive input with bands of width n / div_val^i
projected to n) -> DeFINE unit (n -> m; none for the R1/R2 rows) -> LSTM layers (input m,
hidden H, the last one of width n) -> softmax tied to the map at n (adaptive softmax for an
adaptive map). With the last LSTM layer n wide the output needs no projection; at n = m
this is the layout whose context model counts Table 1a's context-model column.

The layers are cuDNN's ``nn.LSTM``, one per layer (for DropConnect on each W_hh), rather
than fairseq's ``LSTMDecoder``, which steps an ``LSTMCell`` in Python and has neither a
softmax tied to an adaptive input nor AWD-LSTM's regularizers.

AWD-LSTM's regularizers are settings: ``--weight-drop`` (DropConnect on W_hh),
``--dropout-input`` / ``--dropout-hidden`` / ``--dropout`` (locked dropout on the
embeddings, between layers and on the output), ``--dropout-embedding`` (whole word types);
activation regularization (AR, TAR) is in ``--criterion awd_lm_loss``.

Hidden states are carried from segment to segment with ``--task contiguous_lm`` (one state
per stream, reset at a stream's first segment), as truncated BPTT.
"""

import logging
from dataclasses import dataclass, field
from typing import Optional

import torch.nn as nn
from fairseq.dataclass import ChoiceEnum
from fairseq.models import register_model

from ..modules.lm.adaptive_io import ProjectedAdaptiveSoftmax
from ..modules.lm.awd_regularization import WeightDropLSTM, embedding_dropout, locked_dropout
from ..modules.define.config import (
    DEFINE_TRANSFORM_CHOICES,
    DefineConfig,
    DefineConfigError,
)
from ..tools.paper_tables import TABLE_1A, TABLE_1C, TABLE_6, TABLE_7, TABLE_8, table_architectures
from .define_lm import DefineLanguageModel, StreamStateDecoder, adaptive_map, define_on_map
from .named_architectures import register_architectures

logger = logging.getLogger(__name__)

LSTM_INPUT_CENTRING_CHOICES = ChoiceEnum(["none", "embedding", "all"])


@dataclass
class LSTMLMConfig(DefineConfig):
    lstm_layers: int = field(default=4, metadata={"help": "number of LSTM layers"})
    lstm_hidden_dim: int = field(default=1024, metadata={"help": "hidden size H of every LSTM layer but the last (which is n wide)"})
    adaptive_cutoff: Optional[str] = field(
        default=None,
        metadata={"help": "adaptive map and softmax: comma-separated band cutoffs (e.g. "
                  "20000,40000,200000); none: a standard n-dim table and a full softmax"},
    )
    div_val: float = field(default=4.0, metadata={"help": "adaptive map: width divisor from one band to the next"})
    no_softmax_bias: bool = field(default=False, metadata={"help": "no per-word output bias (the adaptive rows of Table 1a have none)"})
    dropout: float = field(default=0.0, metadata={"help": "locked dropout on the last LSTM layer's output"})
    dropout_hidden: float = field(default=0.0, metadata={"help": "locked dropout between LSTM layers"})
    dropout_input: float = field(default=0.0, metadata={"help": "locked dropout on the embeddings (LSTM input)"})
    dropout_embedding: float = field(default=0.0, metadata={"help": "embedding dropout: drop whole word types"})
    weight_drop: float = field(default=0.0, metadata={"help": "DropConnect on the LSTMs' hidden-to-hidden weights"})
    lstm_input_centring: LSTM_INPUT_CENTRING_CHOICES = field(
        default="embedding",
        metadata={"help": "embedding: take the input-weight gradient of the LSTM layer that reads the "
                  "embeddings with its input centred on the batch mean (the mean's share goes to the "
                  "bias); all: of every layer; none: the plain gradient (Merity et al.'s). An input "
                  "with a large shared mean (the authors' DeFINE unit) otherwise gets SGD steps that "
                  "move every gate by one vector; under AWD-LSTM's SGD no embedding measured trained "
                  "worse with it and the authors' unit far better (docs/stability.md). Outputs unchanged"},
    )
    define_map_dim: int = field(default=256, metadata={"help": "n: width of the map (and of the last LSTM layer and the tied softmax)"})
    define_transform: DEFINE_TRANSFORM_CHOICES = field(
        default="none",
        metadata={"help": "none (the map alone: Table 1a R1/R2, n = m) or a DeFINE transform "
                  "(define: R3-R5; the ablations of Tables 6-8); see define_transformer"},
    )


@register_model("define_lstm_lm", dataclass=LSTMLMConfig)
class LSTMLanguageModel(DefineLanguageModel):
    config_class = LSTMLMConfig
    model_name = "define_lstm_lm"

    @classmethod
    def build_decoder(cls, cfg, dictionary, options):
        if cfg.lstm_layers < 1:
            raise DefineConfigError(f"--lstm-layers must be at least 1, got {cfg.lstm_layers}")
        n = cfg.define_map_dim
        # the map outputs n dims; bands narrower than n are projected to n (Table 1a)
        adaptive = adaptive_map(cfg, dictionary, n)
        embed = define_on_map(options, dictionary, adaptive, options.out_dim or n, 1.0)
        return LSTMLanguageModelDecoder(cfg, dictionary, embed, adaptive)


def _centred(cfg, layer: int) -> bool:
    mode = str(getattr(cfg, "lstm_input_centring", LSTMLMConfig.lstm_input_centring))  # absent from older configs
    return mode == "all" or (mode == "embedding" and layer == 0)


class LSTMLanguageModelDecoder(StreamStateDecoder):
    incremental_state_key = "hidden"
    state_batch_dim = 1  # the state: (h, c) per layer, each [1, B, H or n]

    def __init__(self, cfg, dictionary, embed_tokens, adaptive_input):
        super().__init__(dictionary)
        self.cfg = cfg
        self.embed_tokens = embed_tokens
        m = embed_tokens.embedding_dim
        n = cfg.define_map_dim
        L, H = cfg.lstm_layers, cfg.lstm_hidden_dim
        sizes = [m] + [H] * (L - 1) + [n]
        self.layers = nn.ModuleList(
            WeightDropLSTM(sizes[l], sizes[l + 1], cfg.weight_drop, centre_input=_centred(cfg, l)) for l in range(L)
        )
        centred = [l for l, layer in enumerate(self.layers) if layer.centre_input]
        if centred:
            logger.info("LSTM: input-weight gradients of layer(s) %s centred on the batch-mean input "
                        "(--lstm-input-centring %s)", ",".join(map(str, centred)), cfg.lstm_input_centring)
        self.adaptive_softmax = ProjectedAdaptiveSoftmax(adaptive_input, bias=not cfg.no_softmax_bias)

    def step(self, tokens, state=None):
        """(output after dropout [B, T, n], new state, extra with the last layer's raw output
        for AR/TAR)."""
        cfg, training = self.cfg, self.training
        x = self.embed_tokens(tokens)  # [B, T, m]
        x = embedding_dropout(tokens, x, len(self.dictionary), cfg.dropout_embedding, training)
        x = locked_dropout(x, cfg.dropout_input, training)
        new_state = []
        for l, lstm in enumerate(self.layers):
            x, (h, c) = lstm(x, None if state is None else state[l])  # [B, T, H or n]
            new_state.append((h.detach(), c.detach()))  # truncated BPTT
            last = l == len(self.layers) - 1
            raw = x
            x = locked_dropout(x, cfg.dropout if last else cfg.dropout_hidden, training)
        return x, new_state, {"attn": [None], "inner_states": None, "raw_output": raw}  # [B, T, n]


# -- named architectures ---------------------------------------------------------------
# The paper's rows (Tables 1a, 6, 7, 8, 1c) with their settings: tools/paper_tables.py.

ARCHITECTURES = {
    **table_architectures(TABLE_1A, TABLE_6, TABLE_7, TABLE_8, TABLE_1C),
    # CPU sizes
    "define_lstm_small": (
        "For the PTB run on a CPU: 2 layers of 512, n=128 -> m=256, AWD dropouts",
        dict(lstm_layers=2, lstm_hidden_dim=512, adaptive_cutoff="", define_map_dim=128, define_out_dim=256,
             define_transform="define", define_depth=3, define_expand_dim=512, dropout=0.3, dropout_hidden=0.2,
             dropout_input=0.3, dropout_embedding=0.05, weight_drop=0.3)),
    "define_lstm_tiny": (
        "For tests: 2 layers of 32, n=16",
        dict(lstm_layers=2, lstm_hidden_dim=32, adaptive_cutoff="", define_map_dim=16, define_depth=3,
             define_expand_dim=64)),
}
register_architectures("define_lstm_lm", ARCHITECTURES)

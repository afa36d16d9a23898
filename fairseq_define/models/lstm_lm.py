"""LSTM language models with DeFINE (paper section 4.1): the 4-layer LSTM of Table 1a and
the ablations of Tables 6-8 on WikiText-103, and AWD-LSTM + DeFINE on PTB (Table 1c).

Token -> map (standard n-dim table, or adaptive input with bands of width n / div_val^i
projected to n) -> DeFINE unit (n -> m; none for the R1/R2 rows) -> LSTM layers (input m,
hidden H, the last one of width n) -> softmax tied to the map at n (adaptive softmax for an
adaptive map). With the last LSTM layer n wide the output needs no projection; at n = m
this is the layout whose context model counts 23.36 / 24.73 / 26.24M (Table 1a).

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

from dataclasses import dataclass, field
from typing import Dict, Optional

import torch.nn as nn
from fairseq.models import (
    FairseqIncrementalDecoder,
    register_model,
    register_model_architecture,
)

from ..modules.adaptive_io import ProjectedAdaptiveSoftmax
from ..modules.awd_regularization import WeightDropLSTM, embedding_dropout, locked_dropout
from ..modules.define_config import (
    DEFINE_TRANSFORM_CHOICES,
    DefineConfig,
    DefineConfigError,
)
from .define_lm import (
    DefineLanguageModel,
    StreamStateMixin,
    adaptive_map,
    define_on_map,
    set_defaults,
)

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
    def build_decoder(cls, cfg, dictionary):
        if cfg.lstm_layers < 1:
            raise DefineConfigError(f"--lstm-layers must be at least 1, got {cfg.lstm_layers}")
        n = cfg.define_map_dim
        # the map outputs n dims; bands narrower than n are projected to n (Table 1a)
        adaptive = adaptive_map(cfg, dictionary, n)
        embed = define_on_map(cfg, dictionary, adaptive, cfg.define_out_dim or n, 1.0)
        return LSTMLanguageModelDecoder(cfg, dictionary, embed, adaptive)


class LSTMLanguageModelDecoder(StreamStateMixin, FairseqIncrementalDecoder):
    def __init__(self, cfg, dictionary, embed_tokens, adaptive_input):
        super().__init__(dictionary)
        self.cfg = cfg
        self.embed_tokens = embed_tokens
        m = embed_tokens.embedding_dim
        n = cfg.define_map_dim
        L, H = cfg.lstm_layers, cfg.lstm_hidden_dim
        sizes = [m] + [H] * (L - 1) + [n]
        self.layers = nn.ModuleList(
            WeightDropLSTM(sizes[l], sizes[l + 1], cfg.weight_drop) for l in range(L)
        )
        self.adaptive_softmax = ProjectedAdaptiveSoftmax(adaptive_input, bias=not cfg.no_softmax_bias)
        # stream name -> (index of the segment the state precedes, [(h, c) per layer])
        self._stream_memory: Dict[str, tuple] = {}

    def _stream_state(self, stream, segment, batch):
        if stream is None or segment is None:
            return None
        entry = self._stream_memory.get(stream)
        if entry is None or entry[0] != segment or entry[1][0][0].size(1) != batch:
            return None  # a stream's first segment, or not the segment that follows
        return entry[1]

    def forward(self, prev_output_tokens, src_lengths=None, encoder_out=None, incremental_state=None,
                stream: Optional[str] = None, segment: Optional[int] = None, **kwargs):
        if incremental_state is not None:
            state = self.get_incremental_state(incremental_state, "hidden")
            tokens = prev_output_tokens[:, -1:] if state is not None else prev_output_tokens
        else:
            state = self._stream_state(stream, segment, prev_output_tokens.size(0))
            tokens = prev_output_tokens
        x, raw, new_state = self.run_layers(tokens, state)
        if incremental_state is not None:
            self.set_incremental_state(incremental_state, "hidden", new_state)
        elif stream is not None and segment is not None:
            self._stream_memory[stream] = (segment + 1, new_state)
        return x, {"attn": [None], "inner_states": None, "raw_output": raw}

    def extract_features(self, prev_output_tokens, **kwargs):
        """fairseq's interface: (features [B, T, n], extra), from a zero state."""
        x, raw, _ = self.run_layers(prev_output_tokens)
        return x, {"attn": [None], "inner_states": None, "raw_output": raw}

    def run_layers(self, tokens, state=None):
        """(output after dropout [B, T, n], raw output of the last layer, new state)."""
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
        return x, raw, new_state  # [B, T, n]

    def output_layer(self, features, **kwargs):
        return features  # scored by the tied softmax

    def max_positions(self):
        return int(1e6)

    def reorder_incremental_state(self, incremental_state, new_order):
        state = self.get_incremental_state(incremental_state, "hidden")
        if state is not None:
            self.set_incremental_state(
                incremental_state, "hidden",
                [(h.index_select(1, new_order), c.index_select(1, new_order)) for h, c in state],
            )


# -- named architectures ---------------------------------------------------------------

# Table 9's WikiText-103 LSTM; dropouts as Merity et al. (2018a) use on WikiText-103
WT103 = dict(adaptive_cutoff="20000,40000,200000", div_val=4.0, no_softmax_bias=True,
             lstm_layers=4, lstm_hidden_dim=1024, dropout=0.1, dropout_hidden=0.1, dropout_input=0.1)


def _arch(name, doc, **defaults):
    def arch(args):
        set_defaults(args, **defaults)

    arch.__doc__ = doc
    register_model_architecture("define_lstm_lm", name)(arch)


# Table 1a
_arch("define_lstm_wt103_r1_standard", "Table 1a R1: standard tied table n=256 with output bias",
      **{**WT103, "adaptive_cutoff": "", "no_softmax_bias": False}, define_map_dim=256)
_arch("define_lstm_wt103_r2_adaptive", "Table 1a R2: adaptive input/softmax, n=256", **WT103, define_map_dim=256)
for _row, _N, _n in (("r3", 3, 256), ("r4", 7, 384), ("r5", 11, 512)):
    _arch(f"define_lstm_wt103_{_row}_define_n{_n}", f"Table 1a {_row.upper()}: adaptive + DeFINE N={_N}, n=m={_n}, k=1024",
          **WT103, define_map_dim=_n, define_transform="define", define_depth=_N, define_expand_dim=1024)

# Table 6 (N=7, n=m=384, k=1024); GLT uses 4 groups everywhere
# the ablations exist only in the paper's structure: pinned to it whatever the default style
_PAPER = {"define_style": "paper"}
for _t, _extra in (("linear", _PAPER), ("glt", {"define_max_groups": 4, **_PAPER}),
                   ("glt_shuffle", {"define_max_groups": 4, **_PAPER}), ("hgt", _PAPER),
                   ("define_nomix", _PAPER), ("define", {})):
    _arch(f"define_lstm_wt103_t6_{_t}", f"Table 6: {_t} on the adaptive map, N=7, n=m=384, k=1024",
          **WT103, define_map_dim=384, define_transform=_t, define_depth=7, define_expand_dim=1024, **_extra)

# Table 7: depth N (with n=m) x width k
for _N, _n in ((3, 256), (7, 384), (11, 512)):
    for _k in (1024, 1536, 2048):
        _arch(f"define_lstm_wt103_t7_n{_N}_k{_k}", f"Table 7: DeFINE N={_N}, n=m={_n}, k={_k}",
              **WT103, define_map_dim=_n, define_transform="define", define_depth=_N, define_expand_dim=_k)

# Table 8
_arch("define_lstm_wt103_t8_residual", "Table 8a: DeFINE with residual connections (widths k/2), N=7, n=m=384, k=1024",
      **WT103, define_map_dim=384, define_transform="define_residual", define_depth=7, define_expand_dim=1024, **_PAPER)
_arch("define_lstm_wt103_t8_no_reduce", "Table 8b: MER without Reduce (the LSTM reads e_hat, k=1024), N=7, n=384",
      **WT103, define_map_dim=384, define_transform="define", define_depth=7, define_expand_dim=1024, define_no_reduce=True,
      **_PAPER)

# Table 1c: AWD-LSTM on PTB (3 layers of 1150, the last n wide; Merity et al.'s dropouts)
AWD = dict(lstm_layers=3, lstm_hidden_dim=1150, adaptive_cutoff="", dropout=0.4, dropout_hidden=0.25,
           dropout_input=0.4, dropout_embedding=0.1, weight_drop=0.5)
_arch("define_awd_lstm_ptb", "AWD-LSTM baseline (Table 1c): standard 400-dim table, tied", **AWD, define_map_dim=400)
_arch("define_awd_lstm_ptb_define", "Table 1c: AWD-LSTM + DeFINE n=128, k=1024, N=7, m=400; output tied at n=128",
      **AWD, define_map_dim=128, define_transform="define", define_depth=7, define_expand_dim=1024, define_out_dim=400)

# CPU sizes
_arch("define_lstm_small", "For the PTB run on a CPU: 2 layers of 512, n=128 -> m=256, AWD dropouts",
      lstm_layers=2, lstm_hidden_dim=512, adaptive_cutoff="", define_map_dim=128, define_out_dim=256,
      define_transform="define", define_depth=3, define_expand_dim=512, dropout=0.3, dropout_hidden=0.2,
      dropout_input=0.3, dropout_embedding=0.05, weight_drop=0.3)
_arch("define_lstm_tiny", "For tests: 2 layers of 32, n=16", lstm_layers=2, lstm_hidden_dim=32,
      adaptive_cutoff="", define_map_dim=16, define_depth=3, define_expand_dim=64)

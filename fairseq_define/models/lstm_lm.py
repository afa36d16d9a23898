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
import math
from argparse import Namespace
from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.nn as nn
from fairseq.dataclass import ChoiceEnum
from fairseq.models import lstm_lm as stock_lstm_lm
from fairseq.models import register_model
from fairseq.tasks.language_modeling import LanguageModelingTask

from ..modules.define.config import (
    DEFINE_TRANSFORM_CHOICES,
    DefineConfig,
    DefineConfigError,
)
from ..modules.lm.adaptive_io import ProjectedAdaptiveSoftmax
from ..modules.lm.awd_regularization import WeightDropLSTM, embedding_dropout, locked_dropout
from .define_lm import DefineLanguageModel, StreamStateDecoder, adaptive_map, define_on_map
from .named_architectures import register_architectures
from .stock_form import NotExportable, stock_namespace, token_table

logger = logging.getLogger(__name__)

LSTM_INPUT_CENTRING_CHOICES = ChoiceEnum(["none", "embedding", "all"])


@dataclass
class LSTMLMConfig(DefineConfig):
    lstm_layers: int = field(default=4, metadata={"help": "number of LSTM layers"})
    lstm_hidden_dim: int = field(
        default=1024, metadata={"help": "hidden size H of every LSTM layer but the last (which is n wide)"}
    )
    adaptive_cutoff: Optional[str] = field(
        default=None,
        metadata={"help": "adaptive map and softmax: comma-separated band cutoffs (e.g. "
                  "20000,40000,200000); none: a standard n-dim table and a full softmax"},
    )
    div_val: float = field(default=4.0, metadata={"help": "adaptive map: width divisor from one band to the next"})
    no_softmax_bias: bool = field(
        default=False, metadata={"help": "no per-word output bias (the adaptive rows of Table 1a have none)"}
    )
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
    map_scale: float = field(
        default=1.0,
        metadata={"help": "multiplies the map's output, which the LSTM (or the DeFINE unit) reads: 1 as Merity et "
                  "al.'s LSTM; sqrt(n) as fairseq scales an adaptive input (Table 1a's rows at CPU scale: under "
                  "Adam an LSTM reading the unscaled adaptive input, entries of about n^-1/2, saturated its first "
                  "layer and stayed at the unigram perplexity; docs/language_models.md). The tied softmax reads "
                  "the tables unscaled"},
    )
    define_map_dim: int = field(
        default=256, metadata={"help": "n: width of the map (and of the last LSTM layer and the tied softmax)"}
    )
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
        scale = getattr(cfg, "map_scale", 1.0)  # absent from older configs
        if scale <= 0:  # a nan or inf the config bounds refuse before
            raise DefineConfigError(f"--map-scale must be a positive number, got {scale}")
        embed = define_on_map(options, dictionary, adaptive, options.out_dim or n, scale)
        # the map alone is the embedding: the decoder scales its output (a DeFINE unit scales its input itself)
        input_scale = scale if embed is adaptive else 1.0
        return LSTMLanguageModelDecoder(cfg, dictionary, embed, adaptive, input_scale=input_scale)

    def stock_form(self, cfg):
        """fairseq's ``lstm_lm`` where it computes the same function (models/stock_form.py):
        every LSTM layer as wide as the last (n), an adaptive softmax only without output biases
        and with factor 4 (fairseq's lstm_lm fixes it). ``cfg``: the stored model config."""
        dec = self.decoder
        widths = {layer.hidden_size for layer in dec.layers}
        if len(widths) > 1:
            raise NotExportable(
                f"its LSTM layers are {'/'.join(str(l.hidden_size) for l in dec.layers)} wide, but fairseq's lstm_lm "
                "has one width for every layer (exact only with --lstm-hidden-dim equal to --define-map-dim, or one "
                "layer)"
            )
        n = widths.pop()
        asm = dec.adaptive_softmax
        adaptive = asm.n_clusters > 0
        # the input scale of the map alone folds into fairseq's table (its lookup is linear)
        weights = {"decoder.embed_tokens.weight": token_table(dec.embed_tokens) * dec.input_scale}  # [V, m]
        for i, layer in enumerate(dec.layers):
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                weights[f"decoder.layers.{i}.{name}"] = getattr(layer, f"{name}_l0").detach().clone()
        table, _ = asm.tied_input.weights_for_band(0)
        if adaptive:
            if asm.bias is not None:
                raise NotExportable("its adaptive softmax has an output bias per word, which fairseq's adaptive "
                                    "softmax lacks (exact only with --no-softmax-bias)")
            factor = float(self.define_options().div_val)
            if factor != 4.0:
                raise NotExportable(f"its adaptive bands shrink by --div-val {factor:g}, but fairseq's lstm_lm "
                                    "builds its adaptive softmax with factor 4")
            weights["decoder.adaptive_softmax.head.weight"] = torch.cat([table, asm.cluster_weight]).detach().clone()
            for i in range(asm.n_clusters):
                emb, proj = asm.tied_input.weights_for_band(i + 1)  # [V_i, n_i], [n, n_i]
                weights[f"decoder.adaptive_softmax.tail.{i}.0.weight"] = proj.t().detach().clone()
                weights[f"decoder.adaptive_softmax.tail.{i}.2.weight"] = emb.detach().clone()
        else:  # fairseq's fc_out: the n-dim map table, with the per-word bias
            weights["decoder.fc_out.weight"] = table.detach().clone()
            weights["decoder.fc_out.bias"] = (
                (asm.bias if asm.bias is not None else torch.zeros(table.size(0))).detach().clone()
            )
        m = weights["decoder.embed_tokens.weight"].size(1)
        cutoff = ",".join(str(c) for c in asm.cutoff[:-1]) if adaptive else None
        ns = stock_namespace(
            Namespace(**dict(cfg)), stock_lstm_lm.LSTMLanguageModel, LanguageModelingTask, arch="lstm_lm",
            _name="lstm_lm", task="language_modeling", criterion="adaptive_loss" if adaptive else "cross_entropy",
            optimizer=None, lr_scheduler=None, decoder_embed_dim=m, decoder_hidden_size=n, decoder_out_embed_dim=n,
            decoder_layers=len(dec.layers), decoder_attention="0", decoder_dropout_in=0.0, decoder_dropout_out=0.0,
            dropout=0.0, residuals=False, decoder_embed_path=None, share_decoder_input_output_embed=False,
            adaptive_softmax_cutoff=cutoff,
        )
        return (
            ns,
            "language_modeling",
            weights,
            ["decoder.embed_tokens.", "decoder.layers.", "decoder.adaptive_softmax."],
        )


def _centred(cfg, layer: int) -> bool:
    mode = str(getattr(cfg, "lstm_input_centring", LSTMLMConfig.lstm_input_centring))  # absent from older configs
    return mode == "all" or (mode == "embedding" and layer == 0)


class LSTMLanguageModelDecoder(StreamStateDecoder):
    incremental_state_key = "hidden"
    state_batch_dim = 1  # the state: (h, c) per layer, each [1, B, H or n]

    def __init__(self, cfg, dictionary, embed_tokens, adaptive_input, input_scale: float = 1.0):
        """``input_scale``: multiplies the embedding's output (the model's --map-scale where the
        map alone is the embedding)."""
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
        self.input_scale = input_scale

    def step(self, tokens, state=None):
        """(output after dropout [B, T, n], new state, extra with the last layer's raw output
        for AR/TAR)."""
        cfg, training = self.cfg, self.training
        x = self.embed_tokens(tokens)  # [B, T, m]
        if self.input_scale != 1.0:
            x = x * self.input_scale
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
# The paper's rows (Tables 1a, 6, 7, 8, 1c); their numbers and small runs: paper_tables.py.
# Table 9's WikiText-103 LSTM (dropouts as Merity et al., 2018a, use on WikiText-103) with a
# unit of depth N and width k on an n-dim map, n = m.
LSTM_WT103 = dict(adaptive_cutoff="20000,40000,200000", div_val=4.0, no_softmax_bias=True,
                  lstm_layers=4, lstm_hidden_dim=1024, dropout=0.1, dropout_hidden=0.1, dropout_input=0.1)
# the ablations exist only in the paper's structure: pinned to it whatever the default style
PAPER_STYLE = dict(define_style="paper")
# AWD-LSTM on PTB: 3 layers of 1150, the last n wide; Merity et al.'s dropouts
AWD_PTB = dict(lstm_layers=3, lstm_hidden_dim=1150, adaptive_cutoff="", dropout=0.4, dropout_hidden=0.25,
               dropout_input=0.4, dropout_embedding=0.1, weight_drop=0.5)


def wt103_unit(transform: str, N: int, n: int, k: int, **extra) -> dict:
    """The WikiText-103 LSTM with a ``transform`` unit of depth N and width k on an n-dim map, n = m."""
    return dict(LSTM_WT103, define_map_dim=n, define_transform=transform, define_depth=N, define_expand_dim=k, **extra)


_T1A = "LSTM language model on WikiText-103 (Table 1a)"
_T1A_WT2 = "Table 1a's LSTM at CPU scale on WikiText-2: 2 LSTM layers of 1024, adaptive cutoffs 4000,20000"
# Table 1a at CPU scale: half the layers, WikiText-2's bands (its 33,278 types: about 12% and
# 60% of them in the first two), as study 4's transformer_lm
# The map's output scaled by sqrt(n) (n = 256 in both presets), as fairseq scales an adaptive
# input: unscaled, the R2 model stayed at the unigram perplexity under Adam (its first LSTM
# layer saturated while its input was small); both rows alike, so that the unit is their only
# difference
WT2_SCALE = dict(adaptive_cutoff="4000,20000", lstm_layers=2, lstm_hidden_dim=1024, map_scale=math.sqrt(256))
# Table 6: GLT uses 4 groups in every layer and in Reduce, the others the default g_max
_T6 = "Transformations in DeFINE, LSTM on WikiText-103, N=7, n=m=384, k=1024 (Table 6)"
_T7 = "Depth N and width k of DeFINE, LSTM on WikiText-103, n=m (Table 7)"
_T8 = "Skip connections and the Reduce step, LSTM on WikiText-103, N=7, n=384 (Table 8)"
_T1C = "AWD-LSTM on Penn Treebank, no finetuning (Table 1c)"

ARCHITECTURES = {
    # a standard table with an output bias
    "define_lstm_wt103_r1_standard": (
        f"{_T1A}: R1 Standard, n=256",
        dict(LSTM_WT103, adaptive_cutoff="", no_softmax_bias=False, define_map_dim=256),
    ),
    "define_lstm_wt103_r2_adaptive": (f"{_T1A}: R2 Adaptive, n=256", dict(LSTM_WT103, define_map_dim=256)),
    "define_lstm_wt103_r3_define_n256": (
        f"{_T1A}: R3 Adaptive + DeFINE, N=3, n=256",
        wt103_unit("define", 3, 256, 1024),
    ),
    "define_lstm_wt103_r4_define_n384": (
        f"{_T1A}: R4 Adaptive + DeFINE, N=7, n=384",
        wt103_unit("define", 7, 384, 1024),
    ),
    "define_lstm_wt103_r5_define_n512": (
        f"{_T1A}: R5 Adaptive + DeFINE, N=11, n=512",
        wt103_unit("define", 11, 512, 1024),
    ),
    # R2 and R3 at CPU scale on WikiText-2 (studies/lm_adaptive_define.py): the unit's width
    # k keeps it within 6% of the R2 model's parameters (R3: N=3, +1.3%)
    "define_lstm_wt2_r2_adaptive": (
        f"{_T1A_WT2}: R2 Adaptive, n=256",
        dict(LSTM_WT103, define_map_dim=256, **WT2_SCALE),
    ),
    "define_lstm_wt2_r3_define_n256": (
        f"{_T1A_WT2}: R3 Adaptive + DeFINE, N=3, n=256, k=384",
        wt103_unit("define", 3, 256, 384, **WT2_SCALE),
    ),
    "define_lstm_wt103_t6_linear": (f"{_T6}: Linear", wt103_unit("linear", 7, 384, 1024, **PAPER_STYLE)),
    "define_lstm_wt103_t6_glt": (f"{_T6}: GLT", wt103_unit("glt", 7, 384, 1024, define_max_groups=4, **PAPER_STYLE)),
    "define_lstm_wt103_t6_glt_shuffle": (
        f"{_T6}: GLT + Shuffle",
        wt103_unit("glt_shuffle", 7, 384, 1024, define_max_groups=4, **PAPER_STYLE),
    ),
    "define_lstm_wt103_t6_hgt": (f"{_T6}: HGT", wt103_unit("hgt", 7, 384, 1024, **PAPER_STYLE)),
    "define_lstm_wt103_t6_define_nomix": (
        f"{_T6}: DeFINE (w/o mixer)",
        wt103_unit("define_nomix", 7, 384, 1024, **PAPER_STYLE),
    ),
    "define_lstm_wt103_t6_define": (f"{_T6}: DeFINE", wt103_unit("define", 7, 384, 1024)),
    "define_lstm_wt103_t7_n3_k1024": (f"{_T7}: N=3, n=m=256, k=1024", wt103_unit("define", 3, 256, 1024)),
    "define_lstm_wt103_t7_n3_k1536": (f"{_T7}: N=3, n=m=256, k=1536", wt103_unit("define", 3, 256, 1536)),
    "define_lstm_wt103_t7_n3_k2048": (f"{_T7}: N=3, n=m=256, k=2048", wt103_unit("define", 3, 256, 2048)),
    "define_lstm_wt103_t7_n7_k1024": (f"{_T7}: N=7, n=m=384, k=1024", wt103_unit("define", 7, 384, 1024)),
    "define_lstm_wt103_t7_n7_k1536": (f"{_T7}: N=7, n=m=384, k=1536", wt103_unit("define", 7, 384, 1536)),
    "define_lstm_wt103_t7_n7_k2048": (f"{_T7}: N=7, n=m=384, k=2048", wt103_unit("define", 7, 384, 2048)),
    "define_lstm_wt103_t7_n11_k1024": (f"{_T7}: N=11, n=m=512, k=1024", wt103_unit("define", 11, 512, 1024)),
    "define_lstm_wt103_t7_n11_k1536": (f"{_T7}: N=11, n=m=512, k=1536", wt103_unit("define", 11, 512, 1536)),
    "define_lstm_wt103_t7_n11_k2048": (f"{_T7}: N=11, n=m=512, k=2048", wt103_unit("define", 11, 512, 2048)),
    # residual connections: the Expand widths k/2
    "define_lstm_wt103_t8_residual": (
        f"{_T8}: 8a DeFINE + residual connections",
        wt103_unit("define_residual", 7, 384, 1024, **PAPER_STYLE),
    ),
    # without Reduce the LSTM reads e_hat (k dims)
    "define_lstm_wt103_t8_no_reduce": (
        f"{_T8}: 8b MER - Reduce",
        wt103_unit("define", 7, 384, 1024, define_no_reduce=True, **PAPER_STYLE),
    ),
    # a standard 400-dim table, tied
    "define_awd_lstm_ptb": (f"{_T1C}: AWD-LSTM (Merity et al., 2018b)", dict(AWD_PTB, define_map_dim=400)),
    # n=128, k=1024, N=7, m=400; the output tied at n=128
    "define_awd_lstm_ptb_define": (
        f"{_T1C}: AWD-LSTM + DeFINE",
        dict(
            AWD_PTB,
            define_map_dim=128,
            define_transform="define",
            define_depth=7,
            define_expand_dim=1024,
            define_out_dim=400,
        ),
    ),
    # CPU sizes
    "define_lstm_small": (
        "For the PTB run on a CPU: 2 layers of 512, n=128 -> m=256, AWD dropouts",
        dict(
            lstm_layers=2,
            lstm_hidden_dim=512,
            adaptive_cutoff="",
            define_map_dim=128,
            define_out_dim=256,
            define_transform="define",
            define_depth=3,
            define_expand_dim=512,
            dropout=0.3,
            dropout_hidden=0.2,
            dropout_input=0.3,
            dropout_embedding=0.05,
            weight_drop=0.3,
        ),
    ),
    "define_lstm_tiny": (
        "For tests: 2 layers of 32, n=16",
        dict(
            lstm_layers=2,
            lstm_hidden_dim=32,
            adaptive_cutoff="",
            define_map_dim=16,
            define_depth=3,
            define_expand_dim=64,
        ),
    ),
}
register_architectures("define_lstm_lm", ARCHITECTURES)

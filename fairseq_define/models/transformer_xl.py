"""A native Transformer-XL language model (Dai et al. 2019) with DeFINE (paper section 4.1,
Table 2).

Relative attention with global content/position biases, segment-level recurrence (the last
``mem_len`` inputs of every layer, detached, carried to the next segment), ``clamp_len`` and
``same_length``. Input-output layers: adaptive input with per-band projections to d_model
and the projected adaptive softmax tied to it (``--adaptive-cutoff``, ``--div-val``; no
cutoff gives one full-softmax band). n = d_model is the "standard" row, n < d_model the
"projective" one, and ``--define-transform define`` puts the DeFINE unit on the projected
embedding (N=3, k=4096, m=d_model in Table 2).

Memory across batches needs contiguous segments in order: train and evaluate with
``--task contiguous_lm``, whose batches say which stream and segment they are; the decoder
keeps one memory per stream and starts it empty at a stream's first segment.
"""

import math
from dataclasses import dataclass, field
from typing import List, Optional

import torch
import torch.nn as nn
from fairseq.models import register_model
from fairseq.modules import FairseqDropout
from omegaconf import II

from ..modules.config_bounds import MAX_POSITIONS, check_size
from ..modules.define.config import (
    DEFINE_TRANSFORM_CHOICES,
    DefineConfig,
    DefineConfigError,
)
from ..modules.define.embedding import DefineEmbedding
from ..modules.lm.adaptive_io import ProjectedAdaptiveSoftmax
from ..modules.lm.relative_attention import (
    TransformerXLLayer,
    attention_mask,
    init_transformer_xl_weights,
    relative_positions,
)
from .define_lm import DefineLanguageModel, StreamStateDecoder, adaptive_map, define_on_map
from .named_architectures import register_architectures
from .stock_form import NotExportable

Memory = List[torch.Tensor]  # one [B, M, d] tensor per layer


@dataclass
class TransformerXLConfig(DefineConfig):
    decoder_layers: int = field(default=16, metadata={"help": "number of layers"})
    decoder_embed_dim: int = field(default=410, metadata={"help": "d_model"})
    decoder_attention_heads: int = field(default=10, metadata={"help": "attention heads"})
    decoder_head_dim: int = field(default=41, metadata={"help": "dimension of each head"})
    decoder_ffn_embed_dim: int = field(default=2100, metadata={"help": "inner dimension of the feed-forward layers"})
    decoder_normalize_before: bool = field(
        default=False, metadata={"help": "pre-norm layers (the reference's pre_lnorm); default post-norm"}
    )
    dropout: float = field(default=0.1, metadata={"help": "dropout on embeddings, positions, layer outputs"})
    attention_dropout: float = field(default=0.0, metadata={"help": "dropout on attention probabilities"})
    mem_len: int = field(default=150, metadata={"help": "hidden states per layer kept as memory for the next segment"})
    clamp_len: int = field(
        default=-1, metadata={"help": "use the same position embedding for distances beyond this (-1: no clamping)"}
    )
    same_length: bool = field(default=False, metadata={"help": "every query attends to the same number of positions"})
    adaptive_cutoff: Optional[str] = field(
        default=None,
        metadata={"help": "comma-separated band cutoffs of the adaptive input and softmax (e.g. "
                  "20000,40000,200000); none: one band (full softmax)"},
    )
    div_val: float = field(
        default=1.0, metadata={"help": "width divisor from one band to the next (1: every band n-dim)"}
    )
    tgt_len: Optional[int] = field(
        default=II("task.tokens_per_sample"),
        metadata={"help": "segment length: the task's --tokens-per-sample in training; "
                  "fairseq-eval-lm uses the model's value, or --tokens-per-sample N given there "
                  "(or --model-overrides \"{'tgt_len': 64}\")"},
    )
    init_std: float = field(default=0.02, metadata={"help": "std of the normal initialisation of linear layers"})
    # n: the adaptive input's width; DeFINE (if any) reads its d_model-dim projection
    define_map_dim: int = field(
        default=410, metadata={"help": "n: width of the adaptive input bands (first band with --div-val)"}
    )
    define_transform: DEFINE_TRANSFORM_CHOICES = field(
        default="none",
        metadata={"help": "none (Table 2 standard/projective rows) or a DeFINE transform on the "
                  "projected embedding (define: Table 2 DeFINE rows); see define_transformer"},
    )


@register_model("define_transformer_xl", dataclass=TransformerXLConfig)
class TransformerXLLanguageModel(DefineLanguageModel):
    config_class = TransformerXLConfig
    model_name = "define_transformer_xl"

    @classmethod
    def build_decoder(cls, cfg, dictionary, options):
        d = cfg.decoder_embed_dim
        if cfg.mem_len < 0:
            raise DefineConfigError(f"mem_len={cfg.mem_len}: give the memory length in tokens, or 0 for no memory")
        if isinstance(cfg.tgt_len, int) and cfg.tgt_len < 1:
            raise DefineConfigError(
                f"tgt_len={cfg.tgt_len}: the segment length must be at least 1 token (leave it out "
                "for --tokens-per-sample)"
            )
        if cfg.clamp_len < -1:
            raise DefineConfigError(f"clamp_len={cfg.clamp_len}: give a distance in tokens, or -1 for no clamping")
        # lengths in tokens share the positions row of the one bounds table: a memory of 10**12
        # tokens would grow with the evaluated text until memory ran out
        for name in ("mem_len", "tgt_len", "clamp_len"):
            check_size(name, f"--{name.replace('_', '-')} (or '{name}' in --model-overrides)", getattr(cfg, name),
                       MAX_POSITIONS)
        if d % 2:
            raise DefineConfigError(f"--decoder-embed-dim must be even (sinusoidal positions), got {d}")
        adaptive = adaptive_map(cfg, dictionary, d)
        embed = define_on_map(options, dictionary, adaptive, d, math.sqrt(d))
        if embed.embedding_dim != d:
            raise DefineConfigError(
                f"the DeFINE unit outputs {embed.embedding_dim} dims but d_model is {d}; "
                f"leave --define-out-dim unset (or {d}) and drop --define-no-reduce"
            )
        return TransformerXLDecoder(cfg, dictionary, embed, adaptive)

    def memory_span(self, segment_len: int) -> int:
        """Tokens of context that fully determine a segment's outputs (see the decoder)."""
        return self.decoder.memory_span(segment_len)

    def segment_length(self) -> Optional[int]:
        tgt_len = getattr(self.decoder.cfg, "tgt_len", None)
        return tgt_len if isinstance(tgt_len, int) else None

    def stock_form(self, cfg):
        """None (models/stock_form.py): fairseq has no Transformer-XL."""
        raise NotExportable("fairseq has no Transformer-XL (relative positions, segment memory), so a "
                            "define_transformer_xl model has no stock form; serve it with this plugin "
                            "(fairseq-define-cache-tables makes its DeFINE units lookup tables)")


class TransformerXLDecoder(StreamStateDecoder):
    incremental_state_key = "mems"
    state_batch_dim = 0  # the state: one [B, <=mem_len, d] tensor per layer

    def __init__(self, cfg, dictionary, embed_tokens, adaptive_input):
        super().__init__(dictionary)
        self.cfg = cfg
        d = cfg.decoder_embed_dim
        self.embed_tokens = embed_tokens
        # a DeFINE embedding scales its map itself; the unit's output enters unscaled
        self.embed_scale = 1.0 if isinstance(embed_tokens, DefineEmbedding) else math.sqrt(d)
        self.dropout = FairseqDropout(cfg.dropout, module_name=self.__class__.__name__)
        self.layers = nn.ModuleList(
            TransformerXLLayer(
                d, cfg.decoder_attention_heads, cfg.decoder_head_dim, cfg.decoder_ffn_embed_dim,
                cfg.dropout, cfg.attention_dropout, cfg.decoder_normalize_before,
            )
            for _ in range(cfg.decoder_layers)
        )
        init_transformer_xl_weights(self.layers, cfg.init_std)
        # global biases u and v of eq. 4, shared by all layers as in the reference code
        self.content_bias = nn.Parameter(torch.zeros(cfg.decoder_attention_heads, cfg.decoder_head_dim))
        self.position_bias = nn.Parameter(torch.zeros(cfg.decoder_attention_heads, cfg.decoder_head_dim))
        self.adaptive_softmax = ProjectedAdaptiveSoftmax(adaptive_input)

    # -- memory -------------------------------------------------------------------------
    def memory_span(self, segment_len: int) -> int:
        """Tokens of context after which a segment's outputs no longer depend on where the
        stream started. A layer at a segment starting at s reads the layer below at
        [s - mem_len, s + T); those positions are right once the segments holding them
        are, so each layer adds ceil(mem_len / T) whole segments."""
        return self.cfg.decoder_layers * math.ceil(self.cfg.mem_len / segment_len) * segment_len

    def _update_memory(self, hidden: Memory, mems: Optional[Memory]) -> Optional[Memory]:
        if self.cfg.mem_len <= 0:
            return None
        with torch.no_grad():
            if mems is None:
                return [h[:, -self.cfg.mem_len :].detach() for h in hidden]
            return [
                torch.cat([m, h], dim=1)[:, -self.cfg.mem_len :].detach()  # [B, <=mem_len, d]
                for m, h in zip(mems, hidden)
            ]

    # -- forward --------------------------------------------------------------------------
    def step(self, tokens, mems: Optional[Memory] = None):
        """(features [B, T, d], the memory for the next segment (None with mem_len 0),
        extra), reading ``mems`` of the segments before."""
        B, T = tokens.shape
        M = 0 if mems is None else mems[0].size(1)
        x = self.dropout(self.embed_tokens(tokens) * self.embed_scale)  # [B, T, d]
        pos = self.dropout(
            relative_positions(M + T, x.size(-1), self.cfg.clamp_len, x.device, x.dtype)
        )  # [M+T, d]
        mask = attention_mask(T, M, self.cfg.same_length, self.cfg.mem_len, x.device)  # [T, M+T]
        layer_inputs = []
        for i, layer in enumerate(self.layers):
            layer_inputs.append(x)
            x = layer(x, pos, self.content_bias, self.position_bias, mask, None if mems is None else mems[i])
        new_mems = self._update_memory(layer_inputs, mems)
        return self.dropout(x), new_mems, {"attn": [None], "inner_states": None}  # [B, T, d]


# -- named architectures ---------------------------------------------------------------
# Table 2's rows (their numbers and small runs: paper_tables.py): adaptive input n (div_val 1)
# projected to d=384 (inner 1920, 10 heads of 41), with Table 2's DeFINE unit (N=3, k=4096,
# m=384) on the projection in the DeFINE rows; the standard d=410 row is Dai et al.'s base (16
# layers, d=410, inner 2100, n=d=410: the config's defaults). A projective row at n = d = 384
# beside them, which the paper leaves out (its counts are the standard n=384 row's).
TXL_WT103 = dict(adaptive_cutoff="20000,40000,200000", div_val=1.0)
TXL_D384 = dict(decoder_embed_dim=384, decoder_ffn_embed_dim=1920)
TABLE_2_UNIT = dict(define_transform="define", define_expand_dim=4096, define_depth=3)  # Table 2's DeFINE rows
TABLE_2_MAP_DIMS = (
    384,
    256,
    128,
    64,
)  # n of Table 2's rows at d = 384 (also define_transformer_lm's WikiText-103 archs)


def txl_wt103(n: int, define: bool = False) -> dict:
    """Table 2 at d=384: adaptive input n (div_val 1) projected to d, with Table 2's unit if ``define``."""
    return dict(TXL_WT103, **TXL_D384, define_map_dim=n, **(TABLE_2_UNIT if define else {}))


_T2 = "Transformer-XL on WikiText-103 (Table 2a)"

ARCHITECTURES = {
    "define_txl_wt103_standard_d410": (
        f"{_T2}: Standard, n=d=410, inner 2100 (Dai et al.)", dict(TXL_WT103, define_map_dim=410)),
    "define_txl_wt103_standard_d384": (f"{_T2}: Standard, n=384", txl_wt103(384)),
    "define_txl_wt103_define_n384": (f"{_T2}: DeFINE, n=384", txl_wt103(384, define=True)),
    "define_txl_wt103_projective_n256": (f"{_T2}: Projective, n=256", txl_wt103(256)),
    "define_txl_wt103_define_n256": (f"{_T2}: DeFINE, n=256", txl_wt103(256, define=True)),
    "define_txl_wt103_projective_n128": (f"{_T2}: Projective, n=128", txl_wt103(128)),
    "define_txl_wt103_define_n128": (f"{_T2}: DeFINE, n=128", txl_wt103(128, define=True)),
    "define_txl_wt103_projective_n64": (f"{_T2}: Projective, n=64", txl_wt103(64)),
    "define_txl_wt103_define_n64": (f"{_T2}: DeFINE, n=64", txl_wt103(64, define=True)),
    "define_txl_wt103_projective_n384": (
        "Table 2 at d=384: adaptive input n=384 (div_val 1) projected to d=384, no unit", txl_wt103(384)),
    "define_txl_small": (
        "For the WikiText-2 run on a CPU: 4 layers, d=256 (4 heads of 64), inner 1024, n=128 "
        "projected to 256, tgt_len = mem_len = 64.",
        dict(decoder_layers=4, decoder_embed_dim=256, decoder_attention_heads=4, decoder_head_dim=64,
             decoder_ffn_embed_dim=1024, define_map_dim=128, mem_len=64, adaptive_cutoff="4000,20000",
             define_expand_dim=1024, define_depth=3)),
    "define_txl_tiny": (
        "For tests: 2 layers, d=32 (2 heads of 16), inner 64, n=16, mem_len 8.",
        dict(decoder_layers=2, decoder_embed_dim=32, decoder_attention_heads=2, decoder_head_dim=16,
             decoder_ffn_embed_dim=64, define_map_dim=16, mem_len=8, define_expand_dim=64, define_depth=3)),
}
register_architectures("define_transformer_xl", ARCHITECTURES)

"""Token embedding = Map (the embedding's n-dim table, or a map the model builds: the
language models' adaptive input) -> DeFINE unit (paper section 3.4, Figure 1): a drop-in
replacement for a model's ``embed_tokens``. What differs between the unit's styles comes
from their table (styles.py)."""

import logging
import math
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq.modules import FairseqDropout

from ..stability.unit_grad_scale import centre_reduce_bias, log_stability
from .config import DefineConfigError
from .fused_unit import describe_graphs, describe_path, program_of, unit_forward, unit_layers
from .graphed_unit import BACKENDS as GRAPH_BACKENDS
from .graphed_unit import GraphedUnit
from .options import DefineOptions
from .styles import STYLES, UNIT_TYPES  # noqa: F401  (UNIT_TYPES: read from here by the reports)

logger = logging.getLogger(__name__)


def unit_schedule(options: DefineOptions, out_dim: int, in_dim: int):
    """The layer shapes of the unit (of the options' style) reading ``in_dim`` features, in a
    model whose embedding dim is ``out_dim`` (m, unless the options set it); ``in_dim``
    differs from n where the unit reads a model-built map (the Transformer-XL's unit reads
    the projected d_model-dim embedding, Table 2)."""
    m = options.out_dim if options.out_dim is not None else out_dim
    return STYLES[options.style].schedule(options, in_dim, m)


def build_unit(options: DefineOptions, schedule):
    """The DeFINE unit (of the options' style) for a schedule from :func:`unit_schedule`."""
    return STYLES[options.style].unit(schedule, activation=options.activation, norm=options.norm,
                                      bias=options.bias, dropout=options.dropout)


def map_embedding(num_embeddings, dim, padding_idx):
    """An n-dim table initialised as fairseq initialises token embeddings."""
    table = nn.Embedding(num_embeddings, dim, padding_idx=padding_idx)
    nn.init.normal_(table.weight, mean=0, std=dim**-0.5)
    if padding_idx is not None:
        nn.init.constant_(table.weight[padding_idx], 0)
    return table


class DefineEmbedding(nn.Module):
    """Map tokens to n dims, then through the DeFINE unit to ``embedding_dim`` (m).

    ``weight`` is the n-dim map table, so fairseq's output-layer tying
    (``share_decoder_input_output_embed``) ties the softmax to it at n dims;
    :meth:`vocabulary_table` gives the unit's m-dim outputs for an output layer tied to them.
    """

    def __init__(self, options: DefineOptions, num_embeddings, padding_idx, out_dim, map_layer=None, map_scale=1.0):
        """``options``: the model's DeFINE settings, resolved once per model
        (:meth:`DefineOptions.from_config`);
        ``map_layer``: a map built by the model (e.g. the Transformer-XL's projected
        adaptive input, whose d_model-dim output the unit reads); ``map_scale`` multiplies
        its output."""
        super().__init__()
        n = options.map_dim if map_layer is None else map_layer.embedding_dim
        self.style = options.style
        self.schedule = unit_schedule(options, out_dim, n)
        self.padding_idx = padding_idx
        self.num_embeddings = num_embeddings
        self.map_kind = "model" if map_layer is not None else "standard"
        if map_layer is not None:
            self.map = map_layer
            self.map_scale = map_scale
        else:
            self.map = map_embedding(num_embeddings, n, padding_idx)
            self.map_scale = math.sqrt(n)  # as fairseq scales token embeddings
        self.map_dropout = FairseqDropout(options.map_dropout, module_name="DefineMapDropout")
        self.embedding_dim = self.schedule.out_dim
        # how the unit runs, which no weight's function depends on (set_unit_run): the unique-token
        # path changes nothing only if no dropout acts inside the embedding
        self.token_path = "auto"
        self.graphs = None  # a GraphedUnit: the training path captured as graphs (set_unit_run)
        self.has_dropout = options.map_dropout > 0 or options.dropout > 0
        self.stability = None  # (centring, grad scale) of a unit with layers; the projective map trains as is
        self.program = None  # the unit as its training path's program (fused_unit.program_of)
        if options.cached_table:
            self.unit = None
            self.cached_table = nn.Embedding(num_embeddings, self.embedding_dim, padding_idx)
        else:
            self.unit = build_unit(options, self.schedule)
            self.cached_table = None
            self.program = program_of(self.unit)
            if self.program is not None:
                centring = options.unit_centring == "batch_mean"
                if centring and self.map_device().type != "meta":  # (built to count parameters)
                    centre_reduce_bias(self.unit, self.map_outputs_at_init())
                self.stability = (centring, options.unit_grad_scale)
                log_stability(unit_layers(self.unit), *self.stability)
            logger.info("DeFINE unit: %s", describe_path(self.program))

    @torch.no_grad()
    def map_outputs_at_init(self, samples: int = 16384):
        """The map's outputs [S, n] for the vocabulary (a sample of it when larger), without
        dropout: what the unit reads at init."""
        ids = torch.arange(self.num_embeddings)
        if self.num_embeddings > samples:  # a private generator: other inits stay as they are
            ids = torch.randperm(self.num_embeddings, generator=torch.Generator().manual_seed(0))[:samples]
        was_training = self.training
        self.eval()
        try:
            return self.map_tokens(ids.to(self.map_device())[None])[0]  # [S, n]
        finally:
            self.train(was_training)

    @property
    def weight(self):
        """The n-dim map table (standard map), for output-layer tying."""
        if self.map_kind != "standard":
            raise AttributeError(
                "a map built by the model (e.g. an adaptive input) has no single table; tie through .map"
            )
        return self.map.weight

    def map_tokens(self, tokens):
        """The unit's input e [*, n] for ``tokens`` [*]: the map, scaled and dropped out as the
        style reads it."""
        return STYLES[self.style].read_map(self, tokens)

    def forward(self, tokens):
        if self.cached_table is not None:
            if self.training and torch.is_grad_enabled():
                raise self._cached_table_error()
            return self.cached_table(tokens)  # [B, T, m]: a plain lookup (section 3.4)
        if self.unique_tokens(tokens.device) and not (self.training and self.has_dropout):
            # a token's embedding does not depend on its position: compute each distinct
            # token once and gather (gradients accumulate through the gather)
            unique, inverse, counts = torch.unique(tokens, return_inverse=True, return_counts=True)  # [U], [B, T], [U]
            e, scale = self.unit_input(unique)  # [U, n]
            rows = self.run_unit(e, counts, tokens.numel(), scale)  # [U, m]
            # a lookup, not rows[inverse]: embedding's backward sums deterministically on
            # CPU (index_put's accumulation order varies between runs)
            return F.embedding(inverse, rows)  # [B, T, m]
        e, scale = self.unit_input(tokens)  # [B, T, n]
        return self.run_unit(e, None, None, scale)  # [B, T, m]

    def run_unit(self, e, counts, positions, scale):
        """The unit on scale * e (e [*, n]) -> [*, m], each row standing for ``counts`` [rows]
        positions of ``positions`` (the unique-token path; None: one each): a call that
        wants a gradient takes the unit's training path, with the stability settings in its
        backward (fused_unit.unit_forward)."""
        return unit_forward(self.unit, self.program, e, self.stability, counts, positions, scale, self.graphs)

    def unit_input(self, tokens):
        """(e, factor): the unit's input for ``tokens`` is factor * e, with the factor apart
        where the style reads the map so (styles.py; the unit's fused path folds it into a
        matmul), else the map as the style reads it (:meth:`map_tokens`) and 1."""
        factored = STYLES[self.style].factored_map
        parts = factored(self, tokens) if factored is not None else None
        return parts if parts is not None else (self.map_tokens(tokens), 1.0)

    def unique_tokens(self, device: torch.device) -> bool:
        """Whether the unit runs once per distinct token (``token_path``, :func:`set_unit_run`):
        auto dedups on the CPU only, where it pays; elsewhere torch.unique's output size would
        reach the host, a device-to-host sync every step."""
        return self.token_path == "unique" or (self.token_path == "auto" and device.type == "cpu")

    @staticmethod
    def _cached_table_error():
        # a cached table is the trained unit's output, frozen; training it would silently
        # turn the model into one with a plain m-dim embedding
        return DefineConfigError(
            "this model holds cached DeFINE tables (fairseq-define-cache-tables, "
            "--define-cached-table or define_cache_on_load), which are for inference only; "
            "train or fine-tune from the checkpoint with the DeFINE units"
        )

    def train(self, mode: bool = True):
        # fairseq-train sets training mode before its first step: refuse there, before a
        # step fails (which would also write a crash.pt)
        if mode and self.cached_table is not None:
            raise self._cached_table_error()
        return super().train(mode)

    def vocabulary_table(self, chunk: int = 8192) -> torch.Tensor:
        """The embedding of every vocabulary entry, [V, m]: the cached table, or the unit
        run on the whole map (with gradients when they are enabled; what an output layer
        tied to the unit's outputs scores against)."""
        if self.cached_table is not None:
            return self.cached_table.weight
        ids = torch.arange(self.num_embeddings, device=self.map_device())
        return torch.cat([self.run_unit(self.map_tokens(part), None, None, 1.0) for part in ids.split(chunk)])  # [V, m]

    @torch.no_grad()
    def cache_table(self, chunk: int = 8192):
        """Replace the unit by a table of its outputs for every vocabulary entry."""
        if self.cached_table is not None:
            return
        self.eval()  # and it stays so: a cached table is for inference
        rows = self.vocabulary_table(chunk)  # [V, m]
        table = nn.Embedding(self.num_embeddings, self.embedding_dim, self.padding_idx)
        table.weight.data.copy_(rows)
        self.cached_table = table.to(rows.device, rows.dtype)
        self.unit = None
        self.program = self.stability = None

    def map_device(self):
        return next(self.map.parameters()).device


def cache_define_tables(model: nn.Module) -> int:
    """Cache every DeFINE embedding of ``model``; returns the bytes of the cached tables."""
    size = 0
    for module in model.modules():
        if isinstance(module, DefineEmbedding):
            module.cache_table()
            w = module.cached_table.weight
            size += w.numel() * w.element_size()
    return size


# how an embedding may run its unit (set_unit_run); none changes what the weights compute
TOKEN_PATHS = ("auto", "unique", "plain")


GRAPHS = ("off", *GRAPH_BACKENDS)


def set_unit_run(module: nn.Module, token_path: Optional[str] = None, graphs: Optional[str] = None) -> nn.Module:
    """How every DeFINE embedding of ``module`` (one, or a model holding them) runs its unit,
    for the benchmarks and tests that measure it (docs/benchmarks.md; no model setting: no
    recipe gains from it yet). None leaves a setting as it is.

    - ``token_path``: ``unique`` runs the unit once per distinct token of the batch and
      gathers the rows (the same outputs and gradients, less work; taken only without active
      dropout in the embedding), ``plain`` once per position, ``auto`` (an embedding's
      default) unique on the CPU, plain elsewhere (torch.unique's data-dependent size makes
      the host wait for the device every step, and defeats CUDA graphs);
    - ``graphs``: ``cuda`` runs each training call of the unit through CUDA graphs of its fast
      path (graphed_unit.py: its launches off the host), ``eager`` the same logic replayed
      without graphs (the tests, on a CPU), ``off`` (the default) launches its operators one
      by one. Off until a GPU measurement shows it pays (docs/benchmarks.md).

    Returns ``module``."""
    if token_path is not None and token_path not in TOKEN_PATHS:
        raise DefineConfigError(f"token_path must be one of {', '.join(TOKEN_PATHS)}, got {token_path!r}")
    if graphs is not None and graphs not in GRAPHS:
        raise DefineConfigError(f"graphs must be one of {', '.join(GRAPHS)}, got {graphs!r}")
    embeddings = [m for m in module.modules() if isinstance(m, DefineEmbedding)]
    for emb in embeddings:
        if token_path is not None:
            emb.token_path = token_path
        if graphs is not None:
            emb.graphs = GraphedUnit(graphs) if graphs != "off" and emb.program is not None else None
    if embeddings and token_path is not None:
        logger.info("DeFINE units of %d embedding(s): token path %s", len(embeddings), token_path)
    if embeddings and graphs is not None:
        logger.info("DeFINE units of %d embedding(s): %s", len(embeddings),
                    describe_graphs(None if graphs == "off" else graphs))
    return module

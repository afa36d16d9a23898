"""The correlation maps of the token embeddings (appendix B, Figures 4 and 7-11): M = E^T E,
normalised to correlations, for the map e_i, each Expand layer of the DeFINE unit and the
final embedding e_o, over the vocabulary."""

import logging
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from ..errors import UserError
from .figures import new_figure, save_figure

logger = logging.getLogger("fairseq_define.results")

PANEL_INCHES = 3  # width of one correlation map
COLORBAR_INCHES = 1  # extra width for the shared colourbar
CORRELATION_HEIGHT_INCHES = 3.5


@dataclass
class CorrelationMap:
    title: str  # "map e_i (n=..)", "expand layer l (width ..)", "e_o (m=..)"
    corr: Any  # numpy array [w, w]: M = E^T E normalised to correlations
    mean_off_diagonal: float  # mean |corr| off the diagonal


def _normalise(gram):
    """M / sqrt(diag(M) diag(M)^T): the correlations of E^T E (a dimension that is zero over
    the whole vocabulary correlates with nothing)."""
    import torch

    d = gram.diagonal().clamp_min(0).sqrt()
    scale = torch.outer(d, d)
    corr = torch.where(scale > 0, gram / scale.clamp_min(1e-300), torch.zeros_like(gram))
    return corr


def _mean_off_diagonal(corr) -> float:
    w = corr.shape[0]
    if w < 2:
        return 0.0
    a = corr.abs()
    return float((a.sum() - a.diagonal().sum()) / (w * w - w))


def token_embedding(model):
    """(the model's token embedding module, its vocabulary size): the encoder's for
    translation models, the decoder's for language models."""
    for part in ("encoder", "decoder"):
        sub = getattr(model, part, None)
        emb = getattr(sub, "embed_tokens", None) if sub is not None else None
        if emb is not None:
            return emb, len(sub.dictionary)
    raise UserError(f"{type(model).__name__} has no encoder or decoder embed_tokens to draw correlation maps of")


def correlation_maps(
    embed, vocab_size: int, max_tokens: Optional[int] = None, chunk: int = 2048
) -> List[CorrelationMap]:
    """The correlation maps of appendix B: for E the embeddings of vocabulary indices
    0..V-1 (eval mode, no gradients), M = E^T E normalised to correlations, for (a) the map's
    output e_i (n x n; for an adaptive map its projected/concatenated output per token),
    (b) the output of each Expand layer of the DeFINE unit (captured with forward hooks),
    (c) the final embedding e_o (m x m). A token embedding without a DeFINE unit (a plain
    or adaptive table, a cached table) gives what it has."""
    import torch

    from ..modules.define.embedding import DefineEmbedding

    if max_tokens is not None and max_tokens < 1:
        raise UserError(f"--max-tokens-vocab must be at least 1, got {max_tokens}")
    count = vocab_size if max_tokens is None else min(max_tokens, vocab_size)
    is_define = isinstance(embed, DefineEmbedding)
    unit = embed.unit if is_define else None
    layers = list(unit.layers) if unit is not None else []
    residual = unit is not None and unit.skip == "residual"
    captured: List = []
    handles = [layer.register_forward_hook(lambda _m, _i, out: captured.append(out)) for layer in layers]
    grams: Dict[str, object] = {}

    def add(key, x):
        x = x.reshape(-1, x.shape[-1]).double()
        grams[key] = grams[key] + x.T @ x if key in grams else x.T @ x

    was_training = embed.training
    embed.eval()
    try:
        param = next(embed.parameters(), None)
        device = param.device if param is not None else torch.device("cpu")
        with torch.no_grad():
            for ids in torch.arange(count, device=device).split(chunk):
                if not is_define:
                    add("map", embed(ids))
                    continue
                e = embed.map_tokens(ids)  # [c, n]
                add("map", e)
                if unit is None:  # cached table (section 3.4): no unit left
                    add("final", embed.cached_table(ids))
                    continue
                captured.clear()
                add("final", unit(e))
                h = None
                for l, out in enumerate(captured):
                    h = out if h is None or not residual else h + out  # residual: h_l = h_l-1 + F(h_l-1)
                    add(f"expand{l}", h)
    finally:
        for handle in handles:
            handle.remove()
        if getattr(embed, "cached_table", None) is None:  # a cached table stays in evaluation
            embed.train(was_training)
    titles = [("map", "map e_i (n={})")]
    titles += [(f"expand{l}", f"expand layer {l + 1} (width {{}})") for l in range(len(layers))]
    if "final" in grams:
        titles.append(("final", "e_o (m={})"))
    maps = []
    for key, template in titles:
        corr = _normalise(grams[key])
        cm = CorrelationMap(template.format(corr.shape[0]), corr.float().cpu().numpy(), _mean_off_diagonal(corr))
        logger.info("%s: mean |off-diagonal correlation| %.4f over %d tokens", cm.title, cm.mean_off_diagonal, count)
        maps.append(cm)
    return maps


def plot_correlations(maps: Sequence[CorrelationMap], output: str, title: Optional[str] = None,
                      overwrite: bool = False):
    """|correlation| heatmaps in one row, one panel per map, with one colourbar; the figure
    is (PANEL_INCHES x panels + COLORBAR_INCHES) x CORRELATION_HEIGHT_INCHES at DPI."""
    import numpy as np

    fig = new_figure(PANEL_INCHES * len(maps) + COLORBAR_INCHES, CORRELATION_HEIGHT_INCHES)
    axes = fig.subplots(1, len(maps), squeeze=False)[0]
    image = None
    for ax, cm in zip(axes, maps):
        image = ax.imshow(np.abs(cm.corr), vmin=0.0, vmax=1.0, cmap="viridis", interpolation="nearest")
        ax.set_title(cm.title, fontsize=9)
        ax.set_xlabel(f"mean |off-diag| {cm.mean_off_diagonal:.3f}", fontsize=8)
        ax.tick_params(labelsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.subplots_adjust(left=0.3 / fig.get_figwidth(), right=1 - 1.0 / fig.get_figwidth(),
                        top=0.82 if title else 0.88, bottom=0.12, wspace=0.3)
    cax = fig.add_axes([1 - 0.8 / fig.get_figwidth(), 0.15, 0.2 / fig.get_figwidth(), 0.65])
    fig.colorbar(image, cax=cax, label="|correlation|")
    save_figure(fig, output, overwrite)
    return fig

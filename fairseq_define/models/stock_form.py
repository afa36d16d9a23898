"""A DeFINE model as a model of fairseq's own architecture, which a stock fairseq loads
without this plugin (docs/inference.md, "Deploy"): what ``fairseq-define-export`` and
``hub.export(path)`` write.

Each family states its own stock form, as a method of its model:
``model.stock_form(model_cfg)`` returns (the stock model's config, the stock task's name,
weights by stock name, prefixes of the DeFINE weights they replace), or raises
:class:`NotExportable` saying why fairseq has none. DeFINE maps each token on its own (paper
section 3.4), so each side's embedding becomes a plain ``embed_tokens`` table
(:func:`token_table`); the output layer's stock form is models/output_layer.py's. Here:
building the stock model from that, filling its weights, and checking it against the DeFINE
model on a probe batch (:func:`export_state`).
"""

import logging
from argparse import Namespace

import torch
from fairseq import models as fairseq_models
from omegaconf import OmegaConf

from ..errors import UserError
from ..modules.define.embedding import DefineEmbedding
from .stock_config import REGISTRY_SECTIONS, registry_entry, stock_config, training_namespace_keys

logger = logging.getLogger("fairseq_define.export")

# log-probabilities of the export and the DeFINE model on the probe batch may differ by this
PROBE_TOLERANCE = 1e-4


class NotExportable(UserError):
    """The model has no exact form in stock fairseq; the message says why."""


@torch.no_grad()
def token_table(embedding) -> torch.Tensor:
    """Every vocabulary entry's input embedding, [V, m]: a DeFINE embedding's (its cached
    table, or the unit run over the map), or a map used alone (the language models'
    ``--define-transform none``)."""
    if isinstance(embedding, DefineEmbedding):
        return embedding.vocabulary_table().detach().clone()
    if isinstance(embedding, torch.nn.Embedding):
        return embedding.weight.detach().clone()
    ids = torch.arange(embedding.num_embeddings if hasattr(embedding, "num_embeddings") else embedding.cutoff[-1])
    return embedding(ids[None])[0].detach().clone()  # [V, m]: a map is a lookup per token


def stock_namespace(args, model_cls, task_cls, **settings) -> Namespace:
    """The stored Namespace reduced to the options a stock fairseq-train stores for
    ``model_cls`` and ``task_cls``, with ``settings``."""
    sections = {s: getattr(args, s, None) for s in REGISTRY_SECTIONS}
    keys = training_namespace_keys(model_cls, task_cls, sections)
    ns = Namespace(**{k: v for k, v in vars(args).items() if k in keys})
    for s, name in sections.items():
        if registry_entry(s, name) is None:
            setattr(ns, s, None)
    for k, v in settings.items():
        setattr(ns, k, v)
    ns.user_dir = None
    return ns


def stock_weights(stock, model, weights: dict, consumed) -> dict:
    """``stock``'s state dict filled from ``weights`` and, by name, ``model``'s other
    weights; a weight of either left without a place is refused."""
    own = model.state_dict()
    out = stock.state_dict()
    missing = []
    for key, value in out.items():
        if key in weights:
            new = weights[key]
        elif key in own and own[key].shape == value.shape:
            new = own[key]
        elif key.endswith((".version", "._float_tensor")):
            continue  # fairseq's bookkeeping buffers
        else:
            missing.append(key)
            continue
        if new.shape != value.shape:
            raise NotExportable(f"{key} is {tuple(new.shape)} here but {tuple(value.shape)} in fairseq's model")
        out[key] = new.detach().to(device=value.device, dtype=value.dtype).clone()  # the stock model: CPU, fp32
    if missing:
        raise NotExportable(f"fairseq's model has weights this one lacks: {', '.join(missing[:4])}")
    unused = [k for k in own if k not in out and not k.startswith(tuple(consumed)) and not k.endswith("._float_tensor")]
    if unused:
        raise NotExportable(f"fairseq's model has no place for {', '.join(unused[:4])}")
    return out


@torch.no_grad()
def probe_difference(a, b, task, translation: bool) -> float:
    """The largest difference of the two models' log-probabilities on a fixed batch of
    vocabulary tokens (4 sentences; for translation, sources of 9 tokens and prefixes of 7)."""
    g = torch.Generator().manual_seed(0)

    def tokens(dictionary, length):
        return torch.randint(dictionary.nspecial, len(dictionary), (4, length), generator=g)

    src_dict, tgt_dict = (
        (task.source_dictionary, task.target_dictionary) if translation else (None, task.target_dictionary)
    )
    prev = torch.cat([torch.full((4, 1), tgt_dict.eos()), tokens(tgt_dict, 7)], 1)  # [4, 8]
    if translation:
        src = torch.cat([tokens(src_dict, 9), torch.full((4, 1), src_dict.eos())], 1)  # [4, 10]
    results = []
    for m in (a, b):
        dev = next(m.parameters()).device  # a hub model may be on a GPU; the stock one is on the CPU
        out = m(src.to(dev), torch.full((4,), 10, device=dev), prev.to(dev)) if translation else m(prev.to(dev))
        results.append(m.get_normalized_probs(out, log_probs=True).float().cpu())
    return (results[0] - results[1]).abs().max().item()


def stock_form_of(model, model_cfg):
    """``model.stock_form(model_cfg)``; a model without one is not this plugin's."""
    stock_form = getattr(model, "stock_form", None)
    if stock_form is None:
        raise NotExportable(f"{type(model).__name__} is not a fairseq-define model (define_transformer*, "
                            "define_transformer_lm*, define_lstm_lm*); a stock model needs no export")
    with torch.no_grad():
        return stock_form(model_cfg)


def export_state(model, cfg, task, num_updates: int = 0) -> dict:
    """The stock checkpoint of ``model`` (a loaded fairseq-define model; ``cfg``: its
    checkpoint's config; ``task``: the task it was loaded with; ``num_updates``: how long it
    trained), checked on a probe batch. Inference only: no optimizer state."""
    from fairseq_define_patch.installed import float32_checked

    model = float32_checked(model)  # NaN named as damage; a half-precision hub model (hub.bfloat16()) as float32
    model.eval()  # (not model = model.eval(): a hub model's train(), set by make_generation_fast_, returns None)
    plain_cfg = OmegaConf.to_container(cfg, resolve=False) if OmegaConf.is_config(cfg) else dict(cfg)
    model_cfg = cfg["model"] if isinstance(cfg["model"], Namespace) else plain_cfg["model"]
    new_model_cfg, task_name, weights, consumed = stock_form_of(model, model_cfg)
    build_cfg = OmegaConf.create(new_model_cfg) if isinstance(new_model_cfg, dict) else Namespace(**vars(new_model_cfg))
    arch = build_cfg["_name"] if isinstance(new_model_cfg, dict) else build_cfg.arch
    try:
        stock = fairseq_models.build_model(build_cfg, task).eval()
    except (ValueError, AssertionError) as e:
        raise NotExportable(f"fairseq's {arch} model cannot be built from its settings: {e}") from None
    stock.load_state_dict(stock_weights(stock, model, weights, consumed), strict=True)
    translation = task_name == "translation"
    diff = probe_difference(model, stock, task, translation)
    if not diff <= PROBE_TOLERANCE:
        raise NotExportable(f"fairseq's model computes other log-probabilities (by up to {diff:.3g} on a probe "
                            "batch), so it is not an exact form of this model")
    logger.info("fairseq's %s model matches on a probe batch (log-probabilities within %.1e)", arch, diff)
    return {
        "args": None,
        "cfg": stock_config(plain_cfg, new_model_cfg, task_name),
        "model": stock.state_dict(),
        "criterion": None,
        "optimizer_history": [{"criterion_name": "CrossEntropyCriterion", "optimizer_name": "FairseqOptimizer",
                               "lr_scheduler_state": {}, "num_updates": num_updates}],
        "task_state": {},
        "extra_state": {},
        "last_optimizer_state": None,
    }

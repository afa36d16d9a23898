"""What the DeFINE language models (Transformer-XL, LSTM) share: building from a dataclass
config or a named architecture's Namespace, the adaptive map with DeFINE on top, the
parameter report, the load-time table handling, and the state carried from one segment
of a stream to the next."""

from argparse import Namespace
from typing import Dict, Optional, Tuple

from fairseq import utils
from fairseq.models import FairseqLanguageModel

from ..modules.adaptive_io import ProjectedAdaptiveInput
from ..modules.config_bounds import check_dropouts
from ..modules.define_config import DefineConfigError, parse_int_list
from ..modules.define_embedding import DefineEmbedding
from ..modules.define_options import DefineOptions
from ..param_report import log_parameter_distribution
from .inference_tables import InferenceTablesMixin


def set_defaults(args, **defaults):
    """A named architecture: fill what the user did not set."""
    for key, value in defaults.items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)


def adaptive_map(cfg, dictionary, out_dim: int) -> ProjectedAdaptiveInput:
    """The map: adaptive input of width n (``--define-map-dim``; bands n / div_val^i with
    ``--adaptive-cutoff``), each band projected to ``out_dim`` where narrower."""
    cutoff = parse_int_list(cfg.adaptive_cutoff, "--adaptive-cutoff") or []
    return ProjectedAdaptiveInput(len(dictionary), dictionary.pad(), cfg.define_map_dim, cfg.div_val, out_dim, cutoff)


def define_on_map(cfg, dictionary, adaptive, out_dim: int, map_scale: float):
    """The token embedding: the map alone (``--define-transform none``) or a DeFINE unit
    reading the map's output."""
    if str(cfg.define_transform) == "none":
        return adaptive
    return DefineEmbedding(DefineOptions.from_config(cfg), len(dictionary), dictionary.pad(), out_dim, adaptive, map_scale)


class StreamStateMixin:
    """For a decoder that carries state (Transformer-XL memory, LSTM hidden states) from one
    segment of a ``contiguous_lm`` stream to the next in ``self._stream_memory``: stream name
    -> (index of the segment the state precedes, state: tensors in lists/tuples, batch rows
    first or second). The task saves a training stream's state with the data iterator's
    position, so a run resumed in the middle of an epoch continues exactly."""

    _stream_memory: Dict[str, tuple]

    def stream_state(self, stream: str) -> Optional[Tuple[int, object]]:
        """(next segment, state as detached CPU tensors) of ``stream``; None if it has none."""
        entry = self._stream_memory.get(stream)
        if entry is None:
            return None
        # clone: a memory is a slice of a longer tensor, whose whole storage torch.save writes
        return entry[0], utils.apply_to_sample(lambda t: t.detach().cpu().clone(), entry[1])

    def load_stream_state(self, stream: str, segment: int, state) -> None:
        """Continue ``stream`` at ``segment`` from ``state`` (as ``stream_state`` gives it)."""
        device = next(self.parameters()).device
        self._stream_memory[stream] = (segment, utils.apply_to_sample(lambda t: t.to(device), state))


class DefineLanguageModel(InferenceTablesMixin, FairseqLanguageModel):
    """Subclasses set ``config_class`` and ``model_name`` and implement ``build_decoder``."""

    config_class = None
    model_name = ""

    @classmethod
    def build_decoder(cls, cfg, dictionary):
        raise NotImplementedError

    @classmethod
    def build_model(cls, cfg, task):
        if isinstance(cfg, Namespace):  # legacy path (named arch): fill the unset defaults
            name = getattr(cfg, "arch", None)
            cfg = cls.config_class.from_namespace(cfg)
            cfg._name = name
        check_dropouts(cfg)
        from fairseq.tasks.translation import TranslationTask

        if isinstance(task, TranslationTask):  # e.g. an LM checkpoint given to fairseq-generate
            raise DefineConfigError(
                f"{getattr(cfg, '_name', None) or cls.model_name} is a language model, but this command "
                "runs a translation task: score it with fairseq-eval-lm (--task contiguous_lm) on data "
                "binarized with fairseq-preprocess --only-source"
            )
        if getattr(cfg, "define_adaptive_cutoff", None) or str(getattr(cfg, "define_map", "standard")) != "standard":
            raise DefineConfigError(
                "--define-map and --define-adaptive-cutoff do not apply to the language models, whose map "
                "is their adaptive input: drop them and set the bands with --adaptive-cutoff / --div-val"
            )
        model = cls(cls.build_decoder(cfg, task.target_dictionary))
        log_parameter_distribution(model, getattr(cfg, "_name", None) or cls.model_name)
        return model

    def define_options(self):
        return self.decoder.cfg

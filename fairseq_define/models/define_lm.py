"""What the DeFINE language models (Transformer-XL, LSTM) share: building from a dataclass
config or a named architecture's Namespace, the adaptive map with DeFINE on top, the
parameter report, the load-time table handling, and the state carried from one segment
of a stream to the next."""

from argparse import Namespace
from typing import Dict, Optional, Tuple

from fairseq import utils
from fairseq.models import FairseqIncrementalDecoder, FairseqLanguageModel

from ..modules.config_bounds import check_settings
from ..modules.define.config import DefineConfigError, parse_int_list
from ..modules.define.embedding import DefineEmbedding
from ..modules.define.options import DefineOptions
from ..modules.lm.adaptive_io import ProjectedAdaptiveInput
from ..param_report import log_parameter_distribution
from .hub_interface import LanguageModelHubInterface, from_pretrained
from .inference_tables import InferenceTablesMixin


def adaptive_map(cfg, dictionary, out_dim: int) -> ProjectedAdaptiveInput:
    """The map: adaptive input of width n (``--define-map-dim``; bands n / div_val^i with
    ``--adaptive-cutoff``), each band projected to ``out_dim`` where narrower."""
    cutoff = parse_int_list(cfg.adaptive_cutoff, "--adaptive-cutoff") or []
    return ProjectedAdaptiveInput(len(dictionary), dictionary.pad(), cfg.define_map_dim, cfg.div_val, out_dim, cutoff)


def define_on_map(options: DefineOptions, dictionary, adaptive, out_dim: int, map_scale: float):
    """The token embedding: the map alone (``--define-transform none``) or a DeFINE unit
    reading the map's output."""
    if options.transform == "none":
        return adaptive
    return DefineEmbedding(options, len(dictionary), dictionary.pad(), out_dim, adaptive, map_scale)


class StreamStateDecoder(FairseqIncrementalDecoder):
    """A decoder that carries state (Transformer-XL memory, LSTM hidden states) from one
    segment to the next. Subclasses supply ``step`` and ``state_batch_dim``.

    Two homes for the state: in generation, fairseq's incremental state (under
    ``incremental_state_key``), where only the newest token is fed once a state exists; on a
    ``contiguous_lm`` stream (batches name their ``stream`` and ``segment``),
    ``self._stream_memory``: stream name -> (index of the segment the state precedes, state).
    A stream's state is used only by the segment it precedes, at the same batch size, so a
    stream restarts from an empty state at its first segment. The task saves a training
    stream's state with the data iterator's position, so a run resumed in the middle of an
    epoch continues exactly."""

    incremental_state_key = "state"
    state_batch_dim = 0  # the batch dimension of every tensor in a state

    def __init__(self, dictionary):
        super().__init__(dictionary)
        self._stream_memory: Dict[str, tuple] = {}

    def step(self, tokens, state):
        """(features [B, T, d], state after the segment or None to keep none, extra) for
        ``tokens`` [B, T] continuing from ``state`` (None: an empty state)."""
        raise NotImplementedError

    def forward(self, prev_output_tokens, src_lengths=None, encoder_out=None, incremental_state=None,
                stream: Optional[str] = None, segment: Optional[int] = None, **kwargs):
        """``stream``/``segment`` (set by the contiguous_lm task) carry the state between
        calls; with ``incremental_state`` (generation) the state lives there."""
        if incremental_state is not None:
            state = self.get_incremental_state(incremental_state, self.incremental_state_key)
            tokens = prev_output_tokens[:, -1:] if state is not None else prev_output_tokens
        else:
            state = self._stream_state(stream, segment, prev_output_tokens.size(0))
            tokens = prev_output_tokens
        x, new_state, extra = self.step(tokens, state)
        if incremental_state is not None:
            self.set_incremental_state(incremental_state, self.incremental_state_key, new_state)
        elif stream is not None and segment is not None and new_state is not None:
            self._stream_memory[stream] = (segment + 1, new_state)
        return x, extra

    def extract_features(self, prev_output_tokens, **kwargs):
        """fairseq's interface: (features [B, T, d], extra), from an empty state."""
        x, _, extra = self.step(prev_output_tokens, None)
        return x, extra

    def output_layer(self, features, **kwargs):
        return features  # scored by the tied (adaptive) softmax

    def max_positions(self):
        return int(1e6)  # the state carries the context: no limit on the stream length

    def reorder_incremental_state(self, incremental_state, new_order):
        state = self.get_incremental_state(incremental_state, self.incremental_state_key)
        if state is not None:
            dim = self.state_batch_dim
            self.set_incremental_state(
                incremental_state, self.incremental_state_key,
                utils.apply_to_sample(lambda t: t.index_select(dim, new_order), state),
            )

    # -- the streams' state ---------------------------------------------------------------
    def _stream_state(self, stream: Optional[str], segment: Optional[int], batch: int):
        if stream is None or segment is None:
            return None
        entry = self._stream_memory.get(stream)
        if entry is None or entry[0] != segment or _first_tensor(entry[1]).size(self.state_batch_dim) != batch:
            return None  # a stream's first segment, or not the segment that follows
        return entry[1]

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


def _first_tensor(state):
    while isinstance(state, (list, tuple)):
        state = state[0]
    return state


class DefineLanguageModel(InferenceTablesMixin, FairseqLanguageModel):
    """Subclasses set ``config_class`` and ``model_name`` and implement ``build_decoder``."""

    config_class = None
    model_name = ""

    @classmethod
    def build_decoder(cls, cfg, dictionary, options: DefineOptions):
        """The decoder for ``cfg``, with the DeFINE settings resolved from it (``options``)."""
        raise NotImplementedError

    @classmethod
    def build_model(cls, cfg, task):
        if isinstance(cfg, Namespace):  # legacy path (named arch): fill the unset defaults
            name = getattr(cfg, "arch", None)
            cfg = cls.config_class.from_namespace(cfg)
            cfg._name = name
        check_settings(cfg, cls.config_class)
        from fairseq.tasks.translation import TranslationTask

        if isinstance(task, TranslationTask):  # e.g. an LM checkpoint given to fairseq-generate
            raise DefineConfigError(
                f"{getattr(cfg, '_name', None) or cls.model_name} is a language model, but this command "
                "runs a translation task: score it with fairseq-eval-lm (--task contiguous_lm) on data "
                "binarized with fairseq-preprocess --only-source"
            )
        options = DefineOptions.from_config(cfg)  # once for the model
        model = cls(cls.build_decoder(cfg, task.target_dictionary, options))
        log_parameter_distribution(model, getattr(cfg, "_name", None) or cls.model_name)
        return model

    def define_options(self):
        return self.decoder.cfg

    @classmethod
    def from_pretrained(cls, model_name_or_path, checkpoint_file="model.pt", data_name_or_path=".", **kwargs):
        """fairseq's hub loading; the interface also exports an LSTM model to fairseq's own
        lstm_lm where that is exact (``hub.export(path)``)."""
        return from_pretrained(cls, LanguageModelHubInterface, model_name_or_path, checkpoint_file,
                               data_name_or_path, **kwargs)

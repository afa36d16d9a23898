"""A model built without data: a registered architecture and vocabulary sizes are all fairseq's
``build_model`` needs here (a task that holds only the dictionaries), on the meta device
(shapes only). What fairseq-define-params counts, and the tests and benchmarks build."""

from typing import Optional, Sequence

import torch
from fairseq import options
from fairseq.data import Dictionary
from fairseq.models import ARCH_MODEL_REGISTRY, FairseqEncoderDecoderModel, build_model

from fairseq_define_patch.installed import parameter_limit_lifted

from ..modules.config_bounds import MAX_VOCAB_SIZE, check_size
from ..modules.define.config import DefineConfigError


class VocabularyOnlyTask:
    """Just enough of a fairseq task for ``build_model``: the dictionaries."""

    def __init__(self, src_dict: Dictionary, tgt_dict: Dictionary):
        self.source_dictionary = src_dict
        self.target_dictionary = tgt_dict
        self.dictionary = tgt_dict


def dictionary_of_size(size: int) -> Dictionary:
    d = Dictionary()
    if size < len(d) + 1:
        raise DefineConfigError(f"--vocab-size must be larger than {len(d)} (the special symbols), got {size}")
    check_size("the vocabulary size", "--vocab-size / --tgt-vocab-size", size, MAX_VOCAB_SIZE)
    for i in range(size - len(d)):
        d.add_symbol(f"tok{i}")
    return d


def is_translation_arch(arch: str) -> bool:
    return issubclass(ARCH_MODEL_REGISTRY[arch], FairseqEncoderDecoderModel)


def build_arch(arch: str, src_vocab: int, tgt_vocab: Optional[int] = None, extra: Sequence[str] = ()):
    """Build ``arch`` with random weights for the given vocabulary sizes."""
    if arch not in ARCH_MODEL_REGISTRY:
        raise DefineConfigError(
            f"unknown architecture {arch!r}; registered DeFINE ones: "
            + ", ".join(sorted(a for a in ARCH_MODEL_REGISTRY if a.startswith("define")))
        )
    is_seq2seq = is_translation_arch(arch)
    task = "translation" if is_seq2seq else "language_modeling"
    parser = options.get_training_parser(default_task=task)
    args = options.parse_args_and_arch(
        parser, input_args=["-", "--task", task, "--arch", arch, *extra]
    )
    src_dict = dictionary_of_size(src_vocab)
    if tgt_vocab is None or tgt_vocab == src_vocab:
        tgt_dict = src_dict  # joined dictionary (required by --share-all-embeddings)
    else:
        tgt_dict = dictionary_of_size(tgt_vocab)
    # shapes only: no memory, no init time, so no parameter limit (the sizes stay bounded)
    with torch.device("meta"), parameter_limit_lifted():
        return build_model(args, VocabularyOnlyTask(src_dict, tgt_dict)), args

"""Binarized data: a damaged, truncated or mismatched .idx/.bin, token ids outside the
dictionary, or data of the other kind (language model vs translation) gets one line when the
split loads, not a failure mid-training.

fairseq read only the first bytes of a split's files: a truncated or mismatched .bin read
garbage or failed deep inside the model, token ids beyond the dictionary (a damaged .bin, or
data binarized with another dictionary) failed after training had started, and data of the
other kind failed with a KeyError or "Could not infer language pair". A split is now checked
whole when it loads: fairseq/data/indexed_dataset.py reads its index header through
``read_index_header`` and checks the data file with ``check_data_matches_index``;
fairseq/data/data_utils.py calls ``check_token_ids``; the tasks call ``check_lm_data`` and
``language_pair_error``.
"""

import os
import struct

import numpy as np
from fairseq import UserError

__all__ = [
    "bad_mmap_index", "check_data_matches_index", "check_lm_data", "check_token_ids",
    "language_pair_error", "not_an_index", "read_index_header", "release_mmap",
]


def release_mmap(dataset, mmap_name, *others):
    """``__del__`` of an mmap index or dataset: release what ``__init__`` opened, which may be
    nothing when it refused a damaged file (fairseq 0.12.2 raised AttributeError here)."""
    if hasattr(dataset, mmap_name):
        getattr(dataset, mmap_name)._mmap.close()
        delattr(dataset, mmap_name)
    for name in others:
        if hasattr(dataset, name):
            delattr(dataset, name)


def check_token_ids(dataset, dictionary, path):
    """Every id of an mmap split must name a dictionary entry."""
    from fairseq.data import indexed_dataset

    if dictionary is None or not isinstance(dataset, indexed_dataset.MMapIndexedDataset):
        return
    ids = np.frombuffer(dataset._bin_buffer, dtype=dataset._index.dtype)
    if ids.size and not 0 <= ids.min() <= ids.max() < len(dictionary):
        raise UserError(
            "{}.bin holds token ids outside the dictionary's {} entries "
            "(min {}, max {}): the file is damaged or was binarized with another "
            "dictionary; run fairseq-preprocess again".format(
                path, len(dictionary), int(ids.min()), int(ids.max())
            )
        )


def not_an_index(index_path, magic):
    """The error for an index file of no known kind (fairseq returned None: a second error)."""
    return UserError(
        "{} is not an index written by fairseq-preprocess (it starts with "
        "{!r}): the file is damaged; run fairseq-preprocess again".format(index_path, magic)
    )


def bad_mmap_index(path):
    """The error for an mmap index whose magic bytes are wrong (fairseq asserted)."""
    return UserError(
        "{} is not an index written by fairseq-preprocess "
        "(--dataset-impl mmap): the file is damaged or of another "
        "--dataset-impl; run fairseq-preprocess again".format(path)
    )


def read_index_header(stream, path, code_to_dtype):
    """(dtype, number of sentences) from an mmap index's header, after its magic bytes; the
    file's length must be what the header says (12 bytes per sentence after it)."""
    header = stream.read(17)
    file_size = os.fstat(stream.fileno()).st_size
    version = dtype_code = length = None
    if len(header) == 17:
        version = struct.unpack("<Q", header[:8])
        dtype_code = header[8]
        length = struct.unpack("<Q", header[9:])[0]
    if (
        len(header) < 17
        or version != (1,)
        or dtype_code not in code_to_dtype
        or file_size != stream.tell() + 12 * length
    ):
        raise UserError(
            "{} is damaged or truncated: its {} bytes do not match its header; "
            "run fairseq-preprocess again".format(path, file_size)
        )
    return code_to_dtype[dtype_code], length


def check_data_matches_index(index, index_path, data_path, bin_buffer):
    """Each sentence starts where the one before ends, and the data file ends where the last
    one does."""
    sizes = index._sizes.astype(np.int64)
    step = index._dtype_size
    starts = np.concatenate(([0], np.cumsum(sizes[:-1]) * step))[: len(sizes)]
    end = int(starts[-1] + sizes[-1] * step) if len(sizes) else 0
    if (sizes < 0).any() or not np.array_equal(index._pointers, starts) or end != len(bin_buffer):
        raise UserError(
            "{} and {} do not match (the index describes {} bytes, the data file "
            "holds {}): one of them is truncated or damaged; run fairseq-preprocess "
            "again".format(index_path, data_path, end, len(bin_buffer))
        )


def check_lm_data(folder):
    """Translation data given to a language model command: no dict.txt."""
    if os.path.exists(os.path.join(folder, "dict.txt")):
        return
    pairs = sorted(
        f for f in os.listdir(folder) if f.startswith("dict.") and f.endswith(".txt")
    ) if os.path.isdir(folder) else []
    raise UserError(
        "{} has no dict.txt{}: a language model (fairseq-eval-lm, --task "
        "language_modeling) reads data binarized with fairseq-preprocess "
        "--only-source; a translation checkpoint goes with fairseq-generate".format(
            folder,
            " (it holds translation data: {})".format(", ".join(pairs)) if pairs else "",
        )
    )


def language_pair_error(folder):
    """The error for a translation command that cannot tell the language pair (language-model
    data, or no -s/-t)."""
    lm_data = os.path.exists(os.path.join(folder, "dict.txt"))
    return UserError(
        "cannot tell the language pair of {}: {}".format(
            folder,
            "it holds language-model data (dict.txt); a language model "
            "checkpoint goes with fairseq-eval-lm"
            if lm_data
            else "pass --source-lang and --target-lang (the data comes from "
            "fairseq-preprocess -s SRC -t TGT)",
        )
    )

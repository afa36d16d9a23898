"""Binarized data: a damaged, truncated or mismatched .idx/.bin, token ids outside the
dictionary, or data of the other kind (language model vs translation) gets one line when
the split loads, not a failure mid-training."""

from ..edits import CopiedModule, Edit, FilePatch, insert_after, insert_before, replace_span

# The checks are runtime/dataset_files.py (copied into fairseq); each edit calls one where
# fairseq reads the file or the folder.
COPIES = (CopiedModule("dataset_files", "damaged, truncated or mismatched data; ids outside the dictionary"),)

_IMPORT = "from fairseq._define_runtime.dataset_files import {}  # (fairseq_define)\n"

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/data/data_utils.py",
        "token ids beyond the dictionary: one line when the split loads",
        (
            # token ids beyond the dictionary (a damaged .bin, or data binarized with another
            # dictionary) failed deep inside the model, after training had started
            insert_before(
                '        logger.info("loaded {:,} examples from: {}".format(len(dataset), path_k))\n',
                "        "
                + _IMPORT.format("check_token_ids")
                + "        check_token_ids(dataset, dictionary, path_k)  # every id names an entry\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/data/indexed_dataset.py",
        "an empty, truncated or damaged dataset file: a clear error, not a second one in __del__",
        (
            Edit(
                '                return "huffman"\n            else:\n                return None\n',
                '                return "huffman"\n            else:\n'
                "                raise not_an_index(index_file_path(path), magic)  # (fairseq_define)\n",
            ),
            Edit(
                "                assert self._HDR_MAGIC == magic_test, (\n"
                '                    "Index file doesn\'t match expected format. "\n'
                '                    "Make sure that --dataset-impl is configured properly."\n'
                "                )\n",
                "                if self._HDR_MAGIC != magic_test:\n"
                "                    raise bad_mmap_index(path)  # (fairseq_define)\n",
            ),
            # what __init__ opened, released only if it got that far
            Edit(
                "        def __del__(self):\n            self._bin_buffer_mmap._mmap.close()\n"
                "            del self._bin_buffer_mmap\n",
                '        def __del__(self):\n            release_mmap(self, "_bin_buffer_mmap")  # (fairseq_define)\n',
            ),
            Edit(
                "    def __del__(self):\n        self._bin_buffer_mmap._mmap.close()\n"
                "        del self._bin_buffer_mmap\n        del self._index\n",
                '    def __del__(self):\n        release_mmap(self, "_bin_buffer_mmap", "_index")  # '
                '(fairseq_define)\n',
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/tasks/language_modeling.py",
        "translation data given to a language model command: say so",
        (
            Edit(
                '            dictionary = Dictionary.load(os.path.join(paths[0], "dict.txt"))\n',
                "            " + _IMPORT.format("check_lm_data") + "\n"
                "            check_lm_data(paths[0])  # translation data: say so\n"
                '            dictionary = Dictionary.load(os.path.join(paths[0], "dict.txt"))  # checked\n',
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/tasks/translation.py",
        "language-model data given to a translation command: say so",
        (
            Edit(
                "            raise Exception(\n"
                '                "Could not infer language pair, please provide it explicitly"\n'
                "            )\n",
                "            "
                + _IMPORT.format("language_pair_error")
                + "            raise language_pair_error(paths[0])\n",
            ),
        ),
    ),
    # A binarized split is checked whole when it loads, not only its first bytes: the index's
    # header against the index's length, and every sentence's offset against the sizes and the
    # data file's length (a truncated or mismatched .bin read garbage or failed mid-training).
    FilePatch(
        "fairseq",
        "fairseq/data/indexed_dataset.py",
        "the whole index checked against its header and the data file's length",
        (
            replace_span(
                '                version = struct.unpack("<Q", stream.read(8))\n',
                '                self._len = struct.unpack("<Q", stream.read(8))[0]\n',
                "                self._dtype, self._len = read_index_header(stream, path, _code_to_dtype)\n"
                "                self._dtype_size = self._dtype().itemsize  # (fairseq_define) checked\n",
            ),
            insert_after(
                '            data_file_path(self._path), mode="r", order="C"\n'
                "        )\n        self._bin_buffer = memoryview(self._bin_buffer_mmap)\n",
                "        check_data_matches_index(  # (fairseq_define) checked whole\n"
                "            self._index, index_file_path(self._path), data_file_path(self._path), self._bin_buffer\n"
                "        )\n",
            ),
            insert_after(
                "import struct\n",
                "from fairseq._define_runtime.dataset_files import *  # noqa: F401 F403  (fairseq_define)\n",
            ),
        ),
    ),
)

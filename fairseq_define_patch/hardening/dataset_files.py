"""Binarized data: a damaged, truncated or mismatched .idx/.bin, token ids outside the
dictionary, or data of the other kind (language model vs translation) gets one line when
the split loads, not a failure mid-training."""

from ..edits import Edit, FilePatch

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/data/data_utils.py",
        "token ids beyond the dictionary: one line when the split loads",
        (
            # token ids beyond the dictionary (a damaged .bin, or data binarized with another
            # dictionary) failed deep inside the model, after training had started
            Edit(
                "        if dataset is None:\n"
                "            break\n"
                '        logger.info("loaded {:,} examples from: {}".format(len(dataset), path_k))\n',
                "        if dataset is None:\n"
                "            break\n"
                "        if dictionary is not None and isinstance(\n"
                "            dataset, indexed_dataset.MMapIndexedDataset\n"
                "        ):  # (fairseq_define) every id must name a dictionary entry\n"
                "            ids = np.frombuffer(dataset._bin_buffer, dtype=dataset._index.dtype)\n"
                "            if ids.size and not 0 <= ids.min() <= ids.max() < len(dictionary):\n"
                "                from fairseq import UserError\n\n"
                "                raise UserError(\n"
                '                    "{}.bin holds token ids outside the dictionary\'s {} entries "\n'
                '                    "(min {}, max {}): the file is damaged or was binarized with another "\n'
                '                    "dictionary; run fairseq-preprocess again".format(\n'
                "                        path_k, len(dictionary), int(ids.min()), int(ids.max())\n"
                "                    )\n"
                "                )\n"
                '        logger.info("loaded {:,} examples from: {}".format(len(dataset), path_k))\n',
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/data/indexed_dataset.py",
        "an empty, truncated or damaged dataset file: a clear error, not a second one in __del__",
        (
            Edit(
                "            elif magic == HuffmanMMapIndex._HDR_MAGIC[:8]:\n"
                '                return "huffman"\n'
                "            else:\n"
                "                return None\n",
                "            elif magic == HuffmanMMapIndex._HDR_MAGIC[:8]:\n"
                '                return "huffman"\n'
                "            else:\n"
                "                from fairseq import UserError\n\n"
                "                raise UserError(\n"
                '                    "{} is not an index written by fairseq-preprocess (it starts with "\n'
                '                    "{!r}): the file is damaged; run fairseq-preprocess again".format(\n'
                "                        index_file_path(path), magic\n"
                "                    )\n"
                "                )\n",
            ),
            Edit(
                "                assert self._HDR_MAGIC == magic_test, (\n"
                '                    "Index file doesn\'t match expected format. "\n'
                '                    "Make sure that --dataset-impl is configured properly."\n'
                "                )\n",
                "                if self._HDR_MAGIC != magic_test:\n"
                "                    from fairseq import UserError\n\n"
                "                    raise UserError(\n"
                '                        "{} is not an index written by fairseq-preprocess "\n'
                '                        "(--dataset-impl mmap): the file is damaged or of another "\n'
                '                        "--dataset-impl; run fairseq-preprocess again".format(path)\n'
                "                    )\n",
            ),
            Edit(
                "        def __del__(self):\n"
                "            self._bin_buffer_mmap._mmap.close()\n"
                "            del self._bin_buffer_mmap\n",
                "        def __del__(self):\n"
                "            if hasattr(self, \"_bin_buffer_mmap\"):  # not set if opening failed\n"
                "                self._bin_buffer_mmap._mmap.close()\n"
                "                del self._bin_buffer_mmap\n",
            ),
            Edit(
                "    def __del__(self):\n"
                "        self._bin_buffer_mmap._mmap.close()\n"
                "        del self._bin_buffer_mmap\n"
                "        del self._index\n",
                "    def __del__(self):\n"
                "        if hasattr(self, \"_bin_buffer_mmap\"):  # not set if opening failed\n"
                "            self._bin_buffer_mmap._mmap.close()\n"
                "            del self._bin_buffer_mmap\n"
                "        if hasattr(self, \"_index\"):\n"
                "            del self._index\n",
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
                '            if not os.path.exists(os.path.join(paths[0], "dict.txt")):\n'
                "                from fairseq import UserError\n\n"
                "                pairs = sorted(\n"
                "                    f for f in os.listdir(paths[0]) if f.startswith(\"dict.\") and f.endswith(\".txt\")\n"
                "                ) if os.path.isdir(paths[0]) else []\n"
                "                raise UserError(\n"
                '                    "{} has no dict.txt{}: a language model (fairseq-eval-lm, --task "\n'
                '                    "language_modeling) reads data binarized with fairseq-preprocess "\n'
                '                    "--only-source; a translation checkpoint goes with fairseq-generate".format(\n'
                "                        paths[0],\n"
                '                        " (it holds translation data: {})".format(", ".join(pairs)) if pairs else "",\n'
                "                    )\n"
                "                )\n"
                '            dictionary = Dictionary.load(os.path.join(paths[0], "dict.txt"))  # noqa\n',
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/tasks/translation.py",
        "language-model data given to a translation command: say so",
        (
            Edit(
                "        if cfg.source_lang is None or cfg.target_lang is None:\n"
                "            raise Exception(\n"
                '                "Could not infer language pair, please provide it explicitly"\n'
                "            )\n",
                "        if cfg.source_lang is None or cfg.target_lang is None:\n"
                "            from fairseq import UserError\n\n"
                '            lm_data = os.path.exists(os.path.join(paths[0], "dict.txt"))\n'
                "            raise UserError(\n"
                '                "cannot tell the language pair of {}: {}".format(\n'
                "                    paths[0],\n"
                '                    "it holds language-model data (dict.txt); a language model "\n'
                '                    "checkpoint goes with fairseq-eval-lm"\n'
                "                    if lm_data\n"
                '                    else "pass --source-lang and --target-lang (the data comes from "\n'
                '                    "fairseq-preprocess -s SRC -t TGT)",\n'
                "                )\n"
                "            )\n",
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
            Edit(
                '                version = struct.unpack("<Q", stream.read(8))\n'
                "                assert (1,) == version\n"
                "\n"
                '                (dtype_code,) = struct.unpack("<B", stream.read(1))\n'
                "                self._dtype = _code_to_dtype[dtype_code]\n"
                "                self._dtype_size = self._dtype().itemsize\n"
                "\n"
                '                self._len = struct.unpack("<Q", stream.read(8))[0]\n'
                "                offset = stream.tell()\n",
                "                header = stream.read(17)  # (fairseq_define) checked against the file\n"
                "                file_size = os.fstat(stream.fileno()).st_size\n"
                "                if len(header) == 17:\n"
                '                    version = struct.unpack("<Q", header[:8])\n'
                "                    dtype_code = header[8]\n"
                '                    self._len = struct.unpack("<Q", header[9:])[0]\n'
                "                offset = stream.tell()\n"
                "                if (\n"
                "                    len(header) < 17\n"
                "                    or version != (1,)\n"
                "                    or dtype_code not in _code_to_dtype\n"
                "                    or file_size != offset + 12 * self._len\n"
                "                ):\n"
                "                    from fairseq import UserError\n"
                "\n"
                "                    raise UserError(\n"
                '                        "{} is damaged or truncated: its {} bytes do not match its header; "\n'
                '                        "run fairseq-preprocess again".format(path, file_size)\n'
                "                    )\n"
                "                self._dtype = _code_to_dtype[dtype_code]\n"
                "                self._dtype_size = self._dtype().itemsize\n",
            ),
            Edit(
                "        self._bin_buffer_mmap = np.memmap(\n"
                '            data_file_path(self._path), mode="r", order="C"\n'
                "        )\n"
                "        self._bin_buffer = memoryview(self._bin_buffer_mmap)\n",
                "        self._bin_buffer_mmap = np.memmap(\n"
                '            data_file_path(self._path), mode="r", order="C"\n'
                "        )\n"
                "        self._bin_buffer = memoryview(self._bin_buffer_mmap)  # checked whole:\n"
                "        # (fairseq_define) each sentence starts where the one before ends, and the\n"
                "        # data file ends where the last one does\n"
                "        sizes = self._index._sizes.astype(np.int64)\n"
                "        step = self._index._dtype_size\n"
                "        starts = np.concatenate(([0], np.cumsum(sizes[:-1]) * step))[: len(sizes)]\n"
                "        end = int(starts[-1] + sizes[-1] * step) if len(sizes) else 0\n"
                "        if (\n"
                "            (sizes < 0).any()\n"
                "            or not np.array_equal(self._index._pointers, starts)\n"
                "            or end != len(self._bin_buffer)\n"
                "        ):\n"
                "            from fairseq import UserError\n"
                "\n"
                "            raise UserError(\n"
                '                "{} and {} do not match (the index describes {} bytes, the data file "\n'
                '                "holds {}): one of them is truncated or damaged; run fairseq-preprocess "\n'
                '                "again".format(\n'
                "                    index_file_path(self._path),\n"
                "                    data_file_path(self._path),\n"
                "                    end,\n"
                "                    len(self._bin_buffer),\n"
                "                )\n"
                "            )\n",
            ),
            Edit("import shutil\nimport struct\n", "import os\nimport shutil\nimport struct  # os: fairseq_define\n"),
        ),
    ),
)

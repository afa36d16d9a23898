"""numpy 2 removed np.compat, np.int, np.float and percentile(interpolation=)."""

from ..edits import Edit, FilePatch

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/data/token_block_dataset.py",
        "numpy 2: np.compat was removed",
        (Edit("len(sizes), dtype=np.compat.long", "len(sizes), dtype=np.int64"),),
    ),
    FilePatch(
        "fairseq",
        "fairseq/data/language_pair_dataset.py",
        "numpy 2: np.compat was removed",
        (Edit("otypes=[np.compat.long]", "otypes=[np.int64]"),),
    ),
    FilePatch(
        "fairseq",
        "fairseq/data/data_utils.py",
        "numpy 2: np.int and percentile(interpolation=) were removed",
        (
            Edit(
                "(e - s if e - s >= length + min_space else 0 for s, e in parts),\n"
                "                    np.int,\n",
                "(e - s if e - s >= length + min_space else 0 for s, e in parts),\n"
                "                    np.int64,\n",
            ),
            Edit('            interpolation="lower",\n', '            method="lower",\n'),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/modules/dynamic_crf_layer.py",
        "numpy 2: np.float was removed",
        (
            Edit(
                'emissions.scatter(2, targets[:, :, None], np.float("inf"))',
                'emissions.scatter(2, targets[:, :, None], float("inf"))',
            ),
        ),
    ),
)

"""sacrebleu 2 and bitarray 3 changed APIs that fairseq 0.12.2 calls."""

from ..edits import Edit, FilePatch

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq_cli/score.py",
        "sacrebleu 2: corpus_bleu takes lists of strings",
        (
            Edit(
                "print(sacrebleu.corpus_bleu(fdsys, [fdref]).format())",
                'print(sacrebleu.corpus_bleu([s.rstrip("\\n") for s in fdsys], [[s.rstrip("\\n") for s in '
                'fdref]]).format())',
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/data/huffman/huffman_coder.py",
        "bitarray 3 removed util.rindex: the last set bit, found with index on the reversed bits",
        (
            Edit(
                "        remove_cnt = util.rindex(a, 1)\n",
                "        remove_cnt = len(a) - 1 - a[::-1].index(1)\n",
            ),
        ),
    ),
)

"""Python 3.12 and 3.13: what fairseq 0.12.2 needs beyond the Python 3.11 fixes.

Python 3.12 turned invalid escape sequences into a ``SyntaxWarning`` printed whenever the
file is compiled (each command, where the bytecode cannot be cached): one regex in
``wav2vec2_asr.py``; a raw string is the same pattern. hydra-core 1.3 and its parser runtime
(antlr4-python3-runtime 4.9) import and scan their plugins on these Pythons as shipped (the
hydra-core 1.0.7 that fairseq pinned needed edits for both, README.md).

A scan of fairseq, fairseq_cli, hydra, omegaconf and antlr4 under Python 3.12 and 3.13 found
no other removed module (``imp``, ``distutils``, ``asyncore``, ``pkg_resources``) or invalid
escape; fairseq's other files import and run unchanged there (README.md)."""

from ..edits import Edit, FilePatch

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/models/wav2vec/wav2vec2_asr.py",
        "Python 3.12: an invalid escape sequence is a SyntaxWarning; the regex as a raw string",
        (
            Edit(
                '            r = re.compile("encoder.layers.\\d.")\n',
                '            r = re.compile(r"encoder.layers.\\d.")\n',
            ),
        ),
    ),
)

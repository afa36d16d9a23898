"""Python 3.12 and 3.13: what hydra-core 1.0.7, its parser runtime (antlr4-python3-runtime
4.8, pinned by hydra) and fairseq 0.12.2 need beyond the Python 3.11 fixes.

- Python 3.12 removed the finders' ``find_module`` (and the loaders' ``load_module`` path
  with it): hydra's plugin scan, which every fairseq command that builds its config runs,
  fails with ``AttributeError: 'FileFinder' object has no attribute 'find_module'``. The
  scan now imports each plugin module by name, as hydra 1.1 does; a module already imported
  is reused instead of executed a second time.
- Python 3.13 removed ``typing.io``: antlr4 4.8's lexer and parser, and hydra's generated
  override lexer, import ``TextIO`` from it, so ``import hydra`` fails. ``typing.TextIO`` is
  the same class (there since Python 3.5).
- Python 3.12 turned invalid escape sequences into a ``SyntaxWarning`` printed whenever the
  file is compiled (each command, where the bytecode cannot be cached): one regex in
  ``wav2vec2_asr.py``; a raw string is the same pattern.

A scan of fairseq, fairseq_cli, hydra, omegaconf and antlr4 under Python 3.12 and 3.13 found
no other removed module (``imp``, ``distutils``, ``asyncore``, ``pkg_resources``) or invalid
escape; fairseq's other files import and run unchanged there (docs/fairseq_patch.md)."""

from ..edits import Edit, FilePatch

_TYPING_IO = Edit("from typing.io import TextIO\n", "from typing import TextIO\n")

PATCHES = (
    FilePatch(
        "hydra-core",
        "hydra/core/plugins.py",
        "Python 3.12: finders have no find_module; plugins are imported by name",
        (
            Edit(
                "                    m = importer.find_module(modname)\n"
                "                    with warnings.catch_warnings(record=True) as recorded_warnings:\n"
                "                        loaded_mod = m.load_module(modname)\n",
                "                    with warnings.catch_warnings(record=True) as recorded_warnings:\n"
                "                        loaded_mod = importlib.import_module(modname)\n",
            ),
        ),
    ),
    FilePatch(
        "hydra-core",
        "hydra/grammar/gen/OverrideLexer.py",
        "Python 3.13: typing.io is gone; TextIO is in typing",
        (_TYPING_IO,),
    ),
    FilePatch(
        "antlr4-python3-runtime",
        "antlr4/Lexer.py",
        "Python 3.13: typing.io is gone; TextIO is in typing",
        (_TYPING_IO,),
    ),
    FilePatch(
        "antlr4-python3-runtime",
        "antlr4/Parser.py",
        "Python 3.13: typing.io is gone; TextIO is in typing",
        (_TYPING_IO,),
    ),
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

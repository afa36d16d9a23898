"""Config strings (and a checkpoint's stored config) are parsed as plain data, never run by
eval(): fairseq/utils.py gets parse_config_literal, and the modules that call eval() on a
config value bind the name ``eval`` to it (docs/checkpoints.md lists the sites)."""

from typing import Tuple

from ..edits import Edit, FilePatch

# fairseq 0.12.2 runs eval() on config strings (layer lists such as "[(512, 3)] * 20",
# booleans, cutoffs, optimizer betas), and a checkpoint's config is such a string: a file that
# holds only strings passes any weights-only loader and then ran code when its model was built.
# fairseq/utils.py gets a parser that computes what eval gave for plain data and refuses the
# rest; the eval_str_* helpers use it, and every other module that calls eval() on a config
# value (or a data file's line) binds the name ``eval`` to it (one import line, so no call
# site in the module is missed). docs/checkpoints.md lists the sites.
_CONFIG_LITERAL_HELPER = """

from fairseq import UserError as _UserError  # noqa: E402  (fairseq/__init__.py defines it first)


class ConfigLiteralError(_UserError):
    \"\"\"A config value that is not plain data (added by fairseq_define; a ValueError, and a
    UserError that fairseq's command-line tools print as one line).\"\"\"


# What one config string may cost: "[0] * 10**12" or 600 joined copies of "[0] * 1000000"
# would exhaust memory, a long chain of + or - the parser's and the evaluator's recursion
_CONFIG_LITERAL_MAX_ITEMS = 1_000_000  # items (and characters) that its + and * build, together
_CONFIG_LITERAL_MAX_CHARS = 100_000  # length of the string itself
_CONFIG_LITERAL_MAX_DEPTH = 100  # nesting of brackets and operators
_CONFIG_LITERAL_OPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
}


def parse_config_literal(value):
    \"\"\"What ``eval(value)`` gives for a config string that is plain data, without running it.

    Accepted: literals (numbers, strings, bytes, None, True, False, tuples, lists, dicts, sets),
    unary + and -, and + - * / between them, which fairseq's own defaults use
    (``"[(512, 10, 5)] + [(512, 3, 2)] * 4"``). Names, calls, attributes, subscripts,
    comprehensions and lambdas raise ConfigLiteralError: running them could run anything; so
    do strings longer than _CONFIG_LITERAL_MAX_CHARS, nested deeper than
    _CONFIG_LITERAL_MAX_DEPTH, or building more than _CONFIG_LITERAL_MAX_ITEMS items in all.
    Like eval, a value that is not a string raises TypeError (callers rely on it).\"\"\"
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if not isinstance(value, str):
        raise TypeError("eval() arg 1 must be a string, bytes or code object")

    def refuse(why):
        shown = value if len(value) <= 120 else value[:117] + "..."
        return ConfigLiteralError(
            f"refusing to evaluate the config value {shown!r}: {why}; a config or checkpoint "
            "may hold only plain values here (numbers, strings, tuples, lists, dicts, and + - * "
            "/ between them), so fix the value or do not use a checkpoint that holds it"
        )

    budget = [_CONFIG_LITERAL_MAX_ITEMS]  # literals are bounded by the string's length

    def spend(items):
        budget[0] -= items
        if budget[0] < 0:
            raise refuse(f"it builds more than {_CONFIG_LITERAL_MAX_ITEMS} items")

    def walk(node):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = [walk(e) for e in node.elts]
            return {ast.Tuple: tuple, ast.List: list, ast.Set: set}[type(node)](items)
        if isinstance(node, ast.Dict) and None not in node.keys:
            return {walk(k): walk(v) for k, v in zip(node.keys, node.values)}
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            operand = walk(node.operand)
            if not isinstance(operand, (int, float, complex)):
                raise refuse("a sign applies only to numbers")
            return -operand if isinstance(node.op, ast.USub) else +operand
        if isinstance(node, ast.BinOp) and type(node.op) in _CONFIG_LITERAL_OPS:
            left, right = walk(node.left), walk(node.right)
            for seq, n in ((left, right), (right, left)):
                if isinstance(node.op, ast.Mult) and isinstance(seq, (str, bytes, tuple, list)):
                    if isinstance(n, int) and len(seq) * n > _CONFIG_LITERAL_MAX_ITEMS:
                        raise refuse(f"it repeats a sequence beyond {_CONFIG_LITERAL_MAX_ITEMS} items")
                    if isinstance(n, int):
                        spend(len(seq) * max(n, 0))
            sequences = (str, bytes, tuple, list)
            if isinstance(node.op, ast.Add) and isinstance(left, sequences) and isinstance(right, sequences):
                spend(len(left) + len(right))
            try:
                return _CONFIG_LITERAL_OPS[type(node.op)](left, right)
            except (TypeError, ZeroDivisionError, OverflowError) as e:
                raise refuse(str(e)) from None
        what = type(node.op if isinstance(node, (ast.BinOp, ast.UnaryOp)) else node).__name__
        raise refuse(f"{what} is not plain data")

    if len(value) > _CONFIG_LITERAL_MAX_CHARS:
        raise refuse(f"it is {len(value)} characters long, more than {_CONFIG_LITERAL_MAX_CHARS}")
    try:
        tree = ast.parse(value.lstrip(" \\t"), mode="eval")
    except (SyntaxError, ValueError) as e:
        raise refuse(f"not a Python literal ({e.__class__.__name__})") from None
    except (RecursionError, MemoryError):  # the parser's own limits: nested far too deep
        raise refuse(f"it is nested deeper than {_CONFIG_LITERAL_MAX_DEPTH} levels") from None
    levels = [(tree.body, 1)]  # measured without recursion, before walk() recurses
    while levels:
        node, depth = levels.pop()
        if depth > _CONFIG_LITERAL_MAX_DEPTH:
            raise refuse(f"it is nested deeper than {_CONFIG_LITERAL_MAX_DEPTH} levels")
        levels.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return walk(tree.body)

"""

_UTILS_EVAL_HELPERS = (
    "def eval_str_list(x, type=float):\n"
    "    if x is None:\n"
    "        return None\n"
    "    if isinstance(x, str):\n"
    "        x = {call}(x)\n"
    "    try:\n"
    "        return list(map(type, x))\n"
    "    except TypeError:\n"
    "        return [type(x)]\n"
    "\n\n"
    "def eval_str_dict(x, type=dict):\n"
    "    if x is None:\n"
    "        return None\n"
    "    if isinstance(x, str):\n"
    "        x = {call}(x)\n"
    "    return x\n"
    "\n\n"
    "def eval_bool(x, default=False):\n"
    "    if x is None:\n"
    "        return default\n"
    "    try:\n"
    "        return bool({call}(x))\n"
    "    except TypeError:\n"
    "        return default\n"
)

# Modules that call eval() on config values (or, codedataset.py, on a manifest's lines), and
# the two consecutive import lines between which ``eval`` is bound to the parser.
_EVAL_SITES = {
    "fairseq/optim/adam.py": ("import logging\n", "import math\n"),
    "fairseq/optim/cpu_adam.py": ("import importlib\n", "from collections.abc import Collection\n"),
    "fairseq/optim/adamax.py": ("import torch\n", "import torch.optim\n"),
    "fairseq/optim/adafactor.py": ("import math\n", "\n"),
    "fairseq/optim/fused_lamb.py": ("from fairseq.optim import LegacyFairseqOptimizer, register_optimizer\n", "\n"),
    "fairseq/criterions/ctc.py": ("import math\n", "from argparse import Namespace\n"),
    "fairseq/models/lightconv_lm.py": ("from fairseq import utils\n", "from fairseq.models import (\n"),
    "fairseq/models/hubert/hubert.py": ("import logging\n", "from dataclasses import dataclass, field\n"),
    "fairseq/models/transformer_lm.py": ("from dataclasses import dataclass, field\n", "from typing import Optional\n"),
    "fairseq/models/fconv_lm.py": ("from fairseq import utils\n", "from fairseq.models import (\n"),
    "fairseq/models/fconv.py": ("import math\n", "\n"),
    "fairseq/models/fconv_self_att.py": ("import logging\n", "import math\n"),
    "fairseq/models/wav2vec/wav2vec2.py": ("import math\n", "from dataclasses import dataclass, field\n"),
    "fairseq/models/wav2vec/wav2vec.py": ("from dataclasses import dataclass, field\n", "import logging\n"),
    "fairseq/models/speech_to_text/s2t_wav_transformer.py": ("import math\n", "\n"),
    "fairseq/data/audio/raw_audio_dataset.py": ("import logging\n", "import os\n"),
    "fairseq/data/codedataset.py": ("import json\n", "import logging\n"),
    "fairseq_cli/validate.py": ("import logging\n", "import os\n"),
    "fairseq_cli/eval_lm.py": ("import logging\n", "import math\n"),
    "fairseq/examples/data2vec/models/data2vec_audio.py": ("import logging\n", "import math\n"),
    "fairseq/examples/speech_recognition/models/w2l_conv_glu_enc.py": ("import math\n", "\n"),
    "fairseq/examples/speech_recognition/models/vggtransformer.py": ("import argparse\n", "import math\n"),
    # example scripts: eval() of a --model-overrides argument or of a data file's lines
    "fairseq/examples/criss/save_encoder.py": ("import numpy as np\n", "import torch\n"),
    "fairseq/examples/discriminative_reranking_nmt/drnmt_rerank.py": ("from collections import namedtuple\n", "import logging\n"),
    "fairseq/examples/textless_nlp/pgslm/data_utils.py": ("import os\n", "import torch\n"),
    "fairseq/examples/textless_nlp/pgslm/quantize_f0.py": ("from collections import defaultdict\n", "from functools import partial\n"),
    "fairseq/examples/textless_nlp/pgslm/sample/sample.py": ("import os\n", "import torch.multiprocessing as mp\n"),
}
_BIND_EVAL = (
    "from fairseq.utils import parse_config_literal as eval  # noqa: A001  config strings are "
    "parsed, never run (fairseq_define)\n"
)


def _config_literal_patches() -> Tuple[FilePatch, ...]:
    utils_patch = FilePatch(
        "fairseq",
        "fairseq/utils.py",
        "config strings are parsed as plain data, never run (eval_str_list/_dict, eval_bool)",
        (
            Edit("import argparse\nimport collections\n", "import argparse\nimport ast\nimport collections\n"),
            Edit(
                'def csv_str_list(x):\n    return x.split(",")\n\n\n' + _UTILS_EVAL_HELPERS.format(call="eval"),
                'def csv_str_list(x):\n    return x.split(",")\n' + _CONFIG_LITERAL_HELPER + "\n"
                + _UTILS_EVAL_HELPERS.format(call="parse_config_literal"),
            ),
        ),
    )
    sites = tuple(
        FilePatch("fairseq", path, "config strings are parsed as plain data, never run (eval)",
                  (Edit(first + second, first + _BIND_EVAL + second),))
        for path, (first, second) in _EVAL_SITES.items()
    )
    return (utils_patch,) + sites


PATCHES = _config_literal_patches()

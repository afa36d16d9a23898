"""Config strings (and a checkpoint's stored config) are parsed as plain data, never run by
eval(): fairseq/utils.py gets parse_config_literal, and the modules that call eval() on a
config value bind the name ``eval`` to it (docs/checkpoints.md lists the sites)."""

from typing import Tuple

from ..edits import CopiedModule, Edit, FilePatch, insert_before

# The parser is runtime/config_literals.py (copied into fairseq); fairseq/utils.py imports it
# beside its eval_str_* helpers, which call it instead of eval.
COPIES = (CopiedModule("config_literals", "config strings parsed as plain data, never run"),)

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
    "fairseq/examples/discriminative_reranking_nmt/drnmt_rerank.py": (
        "from collections import namedtuple\n",
        "import logging\n",
    ),
    "fairseq/examples/textless_nlp/pgslm/data_utils.py": ("import os\n", "import torch\n"),
    "fairseq/examples/textless_nlp/pgslm/quantize_f0.py": (
        "from collections import defaultdict\n",
        "from functools import partial\n",
    ),
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
        "config strings are parsed as plain data, never run (eval_str_list/_dict, eval_bool); "
        "a list of int holds no float that is not whole",
        (
            # before the helpers that use it; fairseq.utils.parse_config_literal is what the
            # other modules bind ``eval`` to (fairseq/__init__.py defines UserError first)
            insert_before(
                "def eval_str_list(",
                "from fairseq._define_runtime.config_literals import ConfigLiteralError, parse_config_literal, "
                "typed_config_list  # noqa: E402\n\n\n",
            ),
            Edit("        x = eval(x)\n    try:\n", "        x = parse_config_literal(x)\n    try:\n"),
            Edit("        x = eval(x)\n    return x\n", "        x = parse_config_literal(x)\n    return x\n"),
            Edit("        return bool(eval(x))\n", "        return bool(parse_config_literal(x))\n"),
            # a list of int: a float that is not whole is refused, not truncated (cutoffs)
            Edit(
                "        return list(map(type, x))\n    except TypeError:\n",
                "        return typed_config_list(x, type)  # (fairseq_define) 10.5 is not an int\n    except "
                "TypeError:\n",
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

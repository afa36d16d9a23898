import re
from pathlib import Path

from setuptools import find_packages, setup

# the patch's version, from its one home (patch/fairseq_define_patch/__init__.py)
PATCH = Path(__file__).resolve().parent / "patch" / "fairseq_define_patch" / "__init__.py"
PATCH_VERSION = re.search(r'^__version__ = "([^"]+)"', PATCH.read_text(encoding="utf-8"), re.M).group(1)

setup(
    name="fairseq-define",
    version="0.1.0",
    description="DeFINE: Deep Factorized Input Token Embeddings (Mehta et al., ICLR 2020) for fairseq",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.8",
    packages=find_packages(include=["fairseq_define", "fairseq_define.*"]),
    install_requires=[
        # the patch that makes fairseq 0.12.2 run here (patch/, a distribution of its own: install
        # both with `pip install ./patch .`). It brings fairseq's run-time requirements; fairseq
        # itself goes in with --no-deps (docs/install.md): its metadata pins hydra-core 1.0 and
        # omegaconf 2.0, which pip >= 24.1 refuses. torch is pinned by the caller (constraints.txt
        # on CPU, your CUDA build on GPUs).
        f"fairseq-define-patch=={PATCH_VERSION}",
        "torch>=2.0",
        "sacrebleu>=2.0",
        "sentencepiece",
        "subword-nmt",
        "sacremoses",
        "matplotlib",
    ],
    # pytest-xdist: make test runs two workers; filelock: fixtures the workers share (tests/conftest.py)
    # deploy: CTranslate2, the inference engine fairseq-define-export --ct2 converts to (docs/inference.md)
    extras_require={"test": ["pytest", "hypothesis", "pytest-xdist", "filelock", "ruff>=0.17,<0.18"], "deploy": ["ctranslate2>=4.0"]},
    entry_points={
        "console_scripts": [
            "fairseq-define-params = fairseq_define.tools.params:cli_main",
            "fairseq-define-trust-checkpoint = fairseq_define.tools.trust_checkpoint:main",
            "fairseq-define-average-checkpoints = fairseq_define.tools.average_checkpoints:main",
            "fairseq-define-cache-tables = fairseq_define.tools.cache_tables:main",
            "fairseq-define-compress = fairseq_define.tools.compress:main",
            "fairseq-define-results = fairseq_define.tools.results:main",
            "fairseq-define-export = fairseq_define.tools.export:main",
        ]
    },
)

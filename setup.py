from setuptools import find_packages, setup

setup(
    name="fairseq-define",
    version="0.1.0",
    description="DeFINE: Deep Factorized Input Token Embeddings (Mehta et al., ICLR 2020) for fairseq",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.8",
    packages=find_packages(include=["fairseq_define", "fairseq_define.*", "fairseq_define_patch", "fairseq_define_patch.*"]),
    install_requires=[
        # torch is pinned by the caller (constraints.txt on CPU, your CUDA build on GPUs):
        # fairseq's own requirement would otherwise pull the newest torch and CUDA stack.
        "torch>=2.0",
        # fairseq 0.12.2 itself is installed with --no-deps (docs/install.md): its metadata pins
        # hydra-core 1.0 and omegaconf 2.0, which pip >= 24.1 refuses and the patch replaces.
        # Its run-time requirements, as the patched fairseq needs them (the hydra-core and
        # omegaconf range: fairseq_define_patch.CONFIG_LIBRARIES; torchaudio: speech tasks only,
        # imported there; cffi and cython: fairseq's build, not its run):
        "hydra-core>=1.3,<1.4",
        "omegaconf>=2.3,<2.4",
        "bitarray",
        "regex",
        "tqdm",
        "numpy",
        "sacrebleu>=2.0",
        "sentencepiece",
        "subword-nmt",
        "sacremoses",
        "matplotlib",
    ],
    # pytest-xdist: make test runs two workers; filelock: fixtures the workers share (tests/conftest.py)
    # deploy: CTranslate2, the inference engine fairseq-define-export --ct2 converts to (docs/inference.md)
    extras_require={"test": ["pytest", "hypothesis", "pytest-xdist", "filelock"], "deploy": ["ctranslate2>=4.0"]},
    entry_points={
        "console_scripts": [
            "fairseq-define-patch-fairseq = fairseq_define_patch:main",
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

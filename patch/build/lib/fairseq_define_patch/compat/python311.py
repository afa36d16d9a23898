"""Python 3.11: a dataclass instance is no longer accepted as a field default (mutable
default), so fairseq's config dataclasses fail at import; they become
``field(default_factory=...)``, and fairseq reads such defaults through the factory."""

from typing import Sequence, Tuple

from ..edits import Edit, FilePatch


def _default_factory_edits(lines: Sequence[str]) -> Tuple[Edit, ...]:
    """``name: Cls = Cls()`` -> ``name: Cls = field(default_factory=Cls)`` (Python 3.11
    rejects mutable dataclass instances as field defaults)."""
    edits = []
    for line in lines:
        head, _, default = line.rpartition(" = ")
        cls = default.strip()[: -len("()")]
        edits.append(Edit(line, f"{head} = field(default_factory={cls})"))
    return tuple(edits)


PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/dataclass/configs.py",
        "Python 3.11: dataclass instances as field defaults",
        _default_factory_edits(
            [
                "    common: CommonConfig = CommonConfig()",
                "    common_eval: CommonEvalConfig = CommonEvalConfig()",
                "    distributed_training: DistributedTrainingConfig = DistributedTrainingConfig()",
                "    dataset: DatasetConfig = DatasetConfig()",
                "    optimization: OptimizationConfig = OptimizationConfig()",
                "    checkpoint: CheckpointConfig = CheckpointConfig()",
                "    bmuf: FairseqBMUFConfig = FairseqBMUFConfig()",
                "    generation: GenerationConfig = GenerationConfig()",
                "    eval_lm: EvalLMConfig = EvalLMConfig()",
                "    interactive: InteractiveConfig = InteractiveConfig()",
                "    ema: EMAConfig = EMAConfig()",
            ]
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/models/transformer/transformer_config.py",
        "Python 3.11: dataclass instances as field defaults",
        _default_factory_edits(
            [
                "    encoder: EncDecBaseConfig = EncDecBaseConfig()",
                "    decoder: DecoderConfig = DecoderConfig()",
            ]
        )
        + (
            Edit(
                "    quant_noise: QuantNoiseConfig = field(default=QuantNoiseConfig())",
                "    quant_noise: QuantNoiseConfig = field(default_factory=QuantNoiseConfig)",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/dataclass/initialize.py",
        "Python 3.11: read defaults through default_factory",
        (
            Edit(
                "        v = FairseqConfig.__dataclass_fields__[k].default\n",
                "        fld = FairseqConfig.__dataclass_fields__[k]\n"
                "        v = fld.default_factory() if callable(fld.default_factory) else fld.default\n",
            ),
        ),
    ),
)


# fairseq's examples (shipped in the package as fairseq/examples, loaded with --user-dir
# .../fairseq/examples/NAME) have the same Python 3.11 dataclass defaults.
_EXAMPLE_DEFAULTS = {
    "fairseq/examples/data2vec/models/data2vec_text.py": [
        "    transformer: TransformerConfig = TransformerConfig()",
    ],
    "fairseq/examples/speech_recognition/new/infer.py": [
        "    decoding: DecodingConfig = DecodingConfig()",
        "    common: CommonConfig = CommonConfig()",
        "    common_eval: CommonEvalConfig = CommonEvalConfig()",
        "    checkpoint: CheckpointConfig = CheckpointConfig()",
        "    distributed_training: DistributedTrainingConfig = DistributedTrainingConfig()",
        "    dataset: DatasetConfig = DatasetConfig()",
    ],
    "fairseq/examples/wav2vec/unsupervised/w2vu_generate.py": ["    fairseq: FairseqConfig = FairseqConfig()"],
    "fairseq/examples/wav2vec/unsupervised/tasks/unpaired_audio_text.py": [
        "    decoding_config: DecodingConfig = DecodingConfig()",
    ],
    "fairseq/examples/wav2vec/unsupervised/models/wav2vec_u.py": [
        "    segmentation: SegmentationConfig = SegmentationConfig()",
    ],
}

_EXAMPLE_IMPORTS = {  # where ``field`` is not imported yet
    "fairseq/examples/wav2vec/unsupervised/models/wav2vec_u.py": (
        Edit("from dataclasses import dataclass\n", "from dataclasses import dataclass, field\n"),
    ),
}

PATCHES += tuple(
    FilePatch("fairseq", path, "Python 3.11: dataclass instances as field defaults (examples)",
              _EXAMPLE_IMPORTS.get(path, ()) + _default_factory_edits(lines))
    for path, lines in _EXAMPLE_DEFAULTS.items()
)

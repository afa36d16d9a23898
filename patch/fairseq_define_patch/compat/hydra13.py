"""hydra-core 1.3 and omegaconf 2.3: fairseq 0.12.2 composes the same configs, without the
deprecation notices that fairseq's own calls raise.

fairseq 0.12.2 pins hydra-core 1.0 and omegaconf 2.0, whose metadata pip >= 24.1 refuses, so
the set-up installs it without its pins beside the hydra-core and omegaconf pip serves today
(docs/install.md). fairseq 0.12.2 already composes on them (its defaults list names ``_self_``
first, fairseq pull request #3722, so the defaults list still overrides the dataclass values;
omegaconf's renamed ``is_primitive_type_annotation`` is handled), and old checkpoints' stored
configs are plain dicts and Namespaces that omegaconf 2.3 reads as 2.0 did. A config that
omegaconf 2.0 pickled as a ``DictConfig`` loads too, but omegaconf 2.3 reads its metadata as
``typing.Dict[Any, Any]``, which pickles as a call that the weights-only loader refuses when
the loaded state is sent on (a resume under DDP broadcasts it): fairseq's loading re-creates
such a config from its content. What is left are notices a user cannot act on, printed by every
command that builds its config:

- ``hydra.experimental.compose``/``initialize`` are no longer experimental: imported from
  ``hydra``;
- no ``version_base`` (hydra 1.2+): ``"1.1"``, the behaviour hydra assumes without it (which
  is hydra 1.0's for these calls: ``fairseq-hydra-train`` still runs in ``hydra.run.dir``);
- ``compose(strict=False)`` is deprecated: the composed config's struct flag is cleared after
  composing, which is all that ``strict=False`` did;
- ``# @package _group_`` in fairseq's YAML configs: since hydra 1.1 a config's package is
  its group by default (and the primary config's the root), so the header says nothing and
  goes;
- the primary config validated against the ConfigStore schema of the same name (hydra's
  automatic schema matching, deprecated in 1.1 and still done in 1.3): fairseq stores
  ``FairseqConfig`` under the primary config's name on purpose, also for the YAML presets a
  user names with ``fairseq-hydra-train --config-name``, so the notice is silenced, not the
  matching.
"""

from ..edits import Edit, FilePatch, insert_after, insert_before

_NO_HEADER = "# (fairseq_define) no package header: hydra >= 1.1's default package is the same\n"
# fairseq's group configs (fairseq-hydra-train model=transformer_lm/transformer_lm_gpt, ...)
_CONFIGS = (
    "fairseq/config/model/transformer_lm/transformer_lm_baevski_gbw.yaml",
    "fairseq/config/model/transformer_lm/transformer_lm_baevski_wiki103.yaml",
    "fairseq/config/model/transformer_lm/transformer_lm_big.yaml",
    "fairseq/config/model/transformer_lm/transformer_lm_gbw.yaml",
    "fairseq/config/model/transformer_lm/transformer_lm_gpt.yaml",
    "fairseq/config/model/transformer_lm/transformer_lm_gpt2_big.yaml",
    "fairseq/config/model/transformer_lm/transformer_lm_gpt2_medium.yaml",
    "fairseq/config/model/transformer_lm/transformer_lm_gpt2_small.yaml",
    "fairseq/config/model/transformer_lm/transformer_lm_wiki103.yaml",
    "fairseq/config/model/wav2vec/vq_wav2vec_gumbel.yaml",
    "fairseq/config/model/wav2vec2/wav2vec2_base.yaml",
    "fairseq/config/model/wav2vec2/wav2vec2_large.yaml",
)

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/dataclass/utils.py",
        "hydra 1.3: compose and initialize from hydra, version_base 1.3, no strict flag",
        (
            Edit(
                "from hydra.experimental import compose, initialize\n",
                "from hydra import compose, initialize  # (fairseq_define) no longer experimental\n",
            ),
            Edit(
                "    with initialize(config_path=config_path):\n",
                '    with initialize(config_path=config_path, version_base="1.3"):  # (fairseq_define) no notice\n',
            ),
            Edit(
                '            composed_cfg = compose("config", overrides=overrides, strict=False)\n',
                '            composed_cfg = compose("config", overrides=overrides)\n'
                "            OmegaConf.set_struct(composed_cfg, False)  # (fairseq_define) what strict=False did\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq_cli/hydra_train.py",
        "hydra 1.3: version_base 1.1, the behaviour hydra assumes without it (legacy presets)",
        (
            Edit(
                '@hydra.main(config_path=os.path.join("..", "fairseq", "config"), config_name="config")\n',
                '@hydra.main(config_path=os.path.join("..", "fairseq", "config"), config_name="config", '
                'version_base="1.1")\n',
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/dataclass/initialize.py",
        "hydra 1.3: fairseq's schema matched by name and version_base 1.1, without hydra's notices",
        (
            insert_after(
                '    cs.store(name=f"{cfg_name}", node=FairseqConfig)\n',
                "    import warnings  # (fairseq_define) hydra's notices of fairseq's own choices, no user's to act "
                "on\n\n"
                '    warnings.filterwarnings("ignore", r"\\s*\'[^\']*\' is validated against ConfigStore schema with '
                'the same name")\n'
                '    warnings.filterwarnings("ignore", r\'\\s*version_base="1.1" selects Hydra 1.1 compatibility\')\n',
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/config/config.yaml",
        "hydra 1.3: no '# @package _group_' header; fairseq-hydra-train runs in hydra.run.dir, as under hydra 1.0",
        (
            Edit("# @package _group_\n", _NO_HEADER),
            insert_after(
                "hydra:\n  run:\n    dir: .\n",
                "  job:\n    chdir: true  # (fairseq_define) hydra 1.0's behaviour, which hydra >= 1.2 asks to state\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/checkpoint_utils.py",
        "omegaconf 2.3: a stored config pickled by omegaconf 2.0 is re-created from its content",
        (
            insert_before(
                '            state["cfg"] = OmegaConf.create(state["cfg"], flags={"allow_objects": True})\n',
                "            if OmegaConf.is_config(state[\"cfg\"]):  # (fairseq_define) not omegaconf 2.0's metadata\n"
                '                state["cfg"] = OmegaConf.to_container(state["cfg"])\n',
            ),
        ),
    ),
) + tuple(
    FilePatch(
        "fairseq",
        path,
        "hydra 1.3: no '# @package _group_' header, the default package since hydra 1.1",
        (Edit("# @package _group_\n", _NO_HEADER),),
    )
    for path in _CONFIGS
)

"""``fairseq-hydra-train`` on hydra-core 1.3 and omegaconf 2.3 (compat/hydra13.py): a preset
YAML of fairseq 0.12.2's time (a ``# @package _group_`` header, a legacy architecture named
as the model) trains the architecture it names, without hydra's notices about fairseq's own
configs."""

import re

import pytest

from .helpers import run_cli

pytestmark = pytest.mark.cli  # starts fairseq's command-line tools or a recipe

PRESET = """\
# @package _group_
common:
  cpu: true
  log_format: simple
  log_interval: 1
task:
  _name: translation
  data: {data}
model:
  _name: transformer_iwslt_de_en
  encoder_layers: 1
  decoder_layers: 1
criterion:
  _name: cross_entropy
optimizer:
  _name: adam
lr_scheduler:
  _name: fixed
dataset:
  max_tokens: 500
optimization:
  max_update: 1
  lr: [0.001]
checkpoint:
  save_dir: {save_dir}
  no_epoch_checkpoints: true
"""


def test_hydra_train_applies_a_legacy_architecture_preset(wmt_bin, tmp_path):
    """Under omegaconf 2.0 a DictConfig answered ``getattr(cfg, missing, default)`` with None,
    so the architecture's own sizes were lost (fairseq issue #4675: transformer's FFN width,
    and here a crash); under omegaconf 2.3 they are transformer_iwslt_de_en's."""
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "preset.yaml").write_text(PRESET.format(data=wmt_bin / "bin", save_dir=tmp_path / "ck"), encoding="utf-8")
    out = run_cli("fairseq-hydra-train", "--config-dir", conf, "--config-name", "preset", cwd=tmp_path).stdout
    # one encoder and one decoder layer of transformer_iwslt_de_en: FFN 1024 (transformer: 2048)
    assert re.findall(r"\(fc1\): Linear\(in_features=512, out_features=(\d+)", out) == ["1024", "1024"], out[-3000:]
    assert re.search(r"num_updates 1\b", out) and (tmp_path / "ck" / "checkpoint_last.pt").is_file()
    # what hydra says about the user's own preset (its header, hydra.job.chdir unset) is theirs
    # to act on; nothing about fairseq's config store, version_base or hydra's former APIs
    noise = [line for line in out.splitlines()
             if re.search(r"ConfigStore schema|version_base|experimental|strict flag|In 'config'", line)]
    assert not noise, noise

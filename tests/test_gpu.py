"""CUDA and mixed precision (fp16, bf16) checks; skipped on machines without a GPU (CI)."""

import math
import re

import pytest
import torch

from fairseq_define.modules import DefineUnit, build_schedule

from .helpers import TINY, USER_DIR, run_cli

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("transform", ["define", "hgt", "glt_shuffle", "define_residual"])
def test_define_unit_in_bf16_is_close_to_float32(transform):
    torch.manual_seed(0)
    unit = DefineUnit(build_schedule(128, 1024, 3, 512, transform, max_groups=8)).cuda()
    x = torch.randn(64, 128, device="cuda")
    ref = unit(x)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        low = unit(x)
    assert low.dtype == torch.bfloat16
    rel = (low.float() - ref).norm() / ref.norm()
    assert rel < 2e-2, rel


@pytest.mark.parametrize("precision", ["--fp16", "--bf16"])
def test_mixed_precision_training_stays_finite(wmt_bin, tmp_path, precision):
    out = run_cli("fairseq-train", wmt_bin / "bin", "--user-dir", USER_DIR, "--arch", "define_transformer_tiny", *TINY,
                  "--share-all-embeddings", "--optimizer", "adam", "--lr", "5e-4", "--max-tokens", "2000",
                  "--max-update", "300", "--save-dir", tmp_path / "ck", "--no-save", precision,
                  "--log-format", "simple", "--log-interval", "50", "--disable-validation").stdout
    # the trainer chose CUDA (fairseq logs the devices, its spelling): --bf16 no longer means
    # --tpu without torch_xla (the patch's fairseq_bugs/bf16_without_tpu.py)
    assert re.search(r"CUDA enviroments for all \d+ workers", out)
    loss = [float(x) for x in re.findall(r"train_inner \| .*? loss=([0-9.]+|nan|inf)", out)]
    assert len(loss) >= 5 and all(math.isfinite(l) for l in loss), loss
    assert loss[-1] < loss[0]

"""FAIRSEQ_DEFINE_FLUSH_DENORMAL (fairseq_define/denormals.py): subnormal floats flushed to zero
on the CPU when set to 1, kept otherwise; a wrong value is one line naming the variable."""

import pytest
import torch

from fairseq_define import denormals
from fairseq_define.errors import UserError

from .helpers import USER_DIR, run_cli

SUBNORMAL_PRODUCT = (1e-20, 1e-20)  # 1e-40: below float32's smallest normal, 1.2e-38


@pytest.fixture
def restored():
    yield
    torch.set_flush_denormal(False)  # the process-wide default the other tests run with


def product():
    a, b = SUBNORMAL_PRODUCT
    return (torch.tensor([a]) * torch.tensor([b])).item()


@pytest.mark.parametrize("value, flushed", [(None, False), ("0", False), ("1", True), (" 1 ", True)])
def test_the_variable_flushes_subnormals_only_when_1(monkeypatch, restored, value, flushed):
    if value is None:
        monkeypatch.delenv(denormals.ENV, raising=False)
    else:
        monkeypatch.setenv(denormals.ENV, value)
    assert denormals.flush_denormal_from_env() == flushed
    assert (product() == 0.0) == flushed, product()


def test_a_wrong_value_is_a_user_error(monkeypatch, restored):
    monkeypatch.setenv(denormals.ENV, "yes")
    with pytest.raises(UserError, match=f"{denormals.ENV} must be 0 or 1, not 'yes'"):
        denormals.flush_denormal_from_env()
    assert product() != 0.0


@pytest.mark.cli
def test_a_wrong_value_stops_a_cli_with_one_line():
    proc = run_cli("fairseq-train", "--user-dir", USER_DIR, "--help", check=False, env={denormals.ENV: "2"})
    assert proc.returncode != 0
    assert f"{denormals.ENV} must be 0 or 1, not '2'" in proc.stdout
    assert "Traceback" not in proc.stdout


def test_studies_flush_unless_told_otherwise(monkeypatch):
    from studies.common import subprocess_env

    monkeypatch.delenv(denormals.ENV, raising=False)
    assert subprocess_env()[denormals.ENV] == "1"
    monkeypatch.setenv(denormals.ENV, "0")
    assert subprocess_env()[denormals.ENV] == "0"

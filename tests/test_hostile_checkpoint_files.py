"""Crafted checkpoints against the safe loader and fairseq-define-trust-checkpoint: no module
a file names is imported, no crash, no memory a file's size does not pay for, no traceback.
Each file is built byte by byte as an attacker would (docs/checkpoints.md); a checkpoint with
one bit changed is refused by its CRC."""

import io
import os
import pickle
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import torch
from fairseq import checkpoint_utils
from fairseq.checkpoint_utils import CheckpointLoadError, safe_torch_load

from fairseq_define.tools import trust_checkpoint

from .helpers import BIN, FAMILIES


def zip_checkpoint(path, data_pkl, deflate=False, payload=None):
    """A torch.save zip whose data.pkl is ``data_pkl`` (the other records of a real file)."""
    buf = io.BytesIO()
    torch.save({"x": torch.zeros(2) if payload is None else payload}, buf)
    with (
        zipfile.ZipFile(buf) as src,
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED) as dst,
    ):
        for name in src.namelist():
            dst.writestr(name, data_pkl if data_pkl is not None and name.endswith("data.pkl") else src.read(name))
    return path


def pickle_of(body):
    """``{"x": <body>}`` as protocol-2 pickle bytes; body is the opcodes that push one object."""
    return b"\x80\x02}X\x01\x00\x00\x00x" + body + b"s."


def global_(module, name):
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def int_(n):
    return b"J" + struct.pack("<i", n)


def nested_lists(depth):
    return b"]" * depth + b"a" * (depth - 1)


def shared_reference_bomb(levels=12, fanout=40):
    """Each list holds ``fanout`` references to the one before: a tree of fanout**levels nodes
    in a few kilobytes (what a walk without memo, or a copy, would expand); all levels end up
    in one tuple (torch's unpickler has no POP)."""
    out = b"(]q\x00"
    for i in range(1, levels + 1):
        out += b"](" + (b"h" + bytes([i - 1])) * fanout + b"eq" + bytes([i])
    return out + b"t"


NUMPY_F8 = pickle.dumps(np.array([1.0]), protocol=2)[2:-1]  # opcodes that push the array


def test_numpy_opcodes_are_what_the_crafted_files_edit():
    assert b"X\x02\x00\x00\x00f8" in NUMPY_F8 and b"K\x00tq" in NUMPY_F8


# (name, data.pkl) of checkpoints that the safe loader and the trust tool both refuse
BOMBS = {
    "bytearray": pickle_of(global_("__builtin__", "bytearray") + int_(400_000_000) + b"\x85R"),
    "tensor_class": pickle_of(global_("torch", "FloatTensor") + int_(100_000_000) + b"\x85R"),
    "storage": pickle_of(global_("torch.storage", "UntypedStorage") + int_(400_000_000) + b"\x85R"),
    "nested": pickle_of(nested_lists(100_000)),
    "shared_references": pickle_of(shared_reference_bomb()),
}

BOMB_MESSAGES = {"nested": "nested deeper than 100 levels", "shared_references": "references"}


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_the_safe_loader_bounds_what_a_file_builds(tmp_path, name):
    path = zip_checkpoint(tmp_path / f"{name}.pt", BOMBS[name])
    with pytest.raises(CheckpointLoadError, match=BOMB_MESSAGES.get(name, "asks for more memory than a checkpoint")):
        safe_torch_load(str(path))


def test_a_stride_zero_view_is_charged_its_full_size(tmp_path):
    """torch.save itself writes such a file: one element stored, 10**11 described."""
    path = tmp_path / "expanded.pt"
    torch.save({"x": torch.zeros(1).expand(10**6, 10**5)}, path)
    with pytest.raises(CheckpointLoadError, match="a tensor of shape \\(1000000, 100000\\)"):
        safe_torch_load(str(path))


def test_a_compressed_zip_entry_is_refused(tmp_path):
    path = zip_checkpoint(tmp_path / "deflated.pt", None, deflate=True, payload=torch.zeros(200_000))
    assert os.path.getsize(path) < 100_000
    with pytest.raises(CheckpointLoadError, match="zip entries unpack to"):
        safe_torch_load(str(path))


def test_every_allowed_constructor_is_bounded_or_proportional():
    """A torch that adds a constructor to its weights-only allow-list fails here until it is
    classified (bounded_constructors or CHECKPOINT_PROPORTIONAL_GLOBALS)."""
    from torch._weights_only_unpickler import _get_allowed_globals

    allowed = _get_allowed_globals()
    bounded = checkpoint_utils.bounded_constructors(allowed, checkpoint_utils.CheckpointBudget("x", 0))
    unclassified = [k for k, v in allowed.items() if callable(v) and not isinstance(v, torch.dtype)
                    and k not in bounded and k not in checkpoint_utils.CHECKPOINT_PROPORTIONAL_GLOBALS]
    assert unclassified == []
    assert {"builtins.bytearray", "torch.FloatTensor", "torch._utils._rebuild_qtensor"} <= set(bounded)


def test_genuine_checkpoints_still_load(tmp_path):
    import argparse
    import collections

    state = {"model": collections.OrderedDict(w=torch.randn(64, 32), b=torch.nn.Parameter(torch.zeros(32))),
             "args": argparse.Namespace(lr=[0.1]), "shared": [torch.ones(3)] * 3, "blob": bytearray(b"abc"),
             "sparse": torch.eye(3).to_sparse(), "view": torch.arange(10.0)[2:5]}
    for legacy in (False, True):
        torch.save(state, tmp_path / "ok.pt", _use_new_zipfile_serialization=not legacy)
        loaded = safe_torch_load(str(tmp_path / "ok.pt"))
        assert torch.equal(loaded["model"]["w"], state["model"]["w"]) and loaded["blob"] == bytearray(b"abc")
        assert torch.equal(loaded["sparse"].to_dense(), torch.eye(3)) and loaded["view"].tolist() == [2.0, 3.0, 4.0]


@pytest.fixture
def planted_fairseq_module(tmp_path, monkeypatch):
    """A module ``fairseq.planted_by_a_file`` whose import leaves a marker file."""
    import fairseq

    folder = tmp_path / "planted"
    folder.mkdir()
    marker = tmp_path / "imported"
    (folder / "planted_by_a_file.py").write_text(f"open({str(marker)!r}, 'w').close()\nclass Thing:\n    pass\n")
    monkeypatch.setattr(fairseq, "__path__", list(fairseq.__path__) + [str(folder)])
    yield marker
    sys.modules.pop("fairseq.planted_by_a_file", None)


def test_no_module_a_file_names_is_imported(tmp_path, planted_fairseq_module):
    marker = planted_fairseq_module
    assert checkpoint_utils.resolve_checkpoint_global("fairseq.planted_by_a_file.Thing") == ("code", None)
    path = zip_checkpoint(tmp_path / "names.pt", pickle_of(global_("fairseq.planted_by_a_file", "Thing") + b")\x81"))
    with pytest.raises(CheckpointLoadError, match="holds code"):
        safe_torch_load(str(path))
    assert trust_checkpoint.main([str(path), str(tmp_path / "new.pt")]) == 2
    assert not marker.exists() and "fairseq.planted_by_a_file" not in sys.modules


def test_enums_resolve_only_from_imported_modules():
    from fairseq.data.text_compressor import TextCompressionLevel

    assert checkpoint_utils.resolve_checkpoint_global("fairseq.data.text_compressor.TextCompressionLevel") == (
        "data", TextCompressionLevel)
    for name in ("fairseq.data.text_compressor.TextCompressor",  # a class, not an enum
                 "fairseq.examples.textless_nlp.gslm.unit2speech.multiproc.os",
                 "omegaconf.not_a_module.Enum"):
        assert checkpoint_utils.resolve_checkpoint_global(name) == ("code", None)
    assert "fairseq.examples.textless_nlp.gslm.unit2speech.multiproc" not in sys.modules


def convert(tmp_path, data_pkl, capsys):
    src = zip_checkpoint(tmp_path / "src.pt", data_pkl)
    rc = trust_checkpoint.main([str(src), str(tmp_path / "new.pt")])
    return rc, capsys.readouterr().err


# (name, data.pkl, what the one-line refusal says) for the trust tool
TRUST_REFUSALS = [
    ("object_array", pickle_of(pickle.dumps(np.array([1, "a"], dtype=object), protocol=2)[2:-1]), "numpy dtype 'O8'"),
    ("structured", pickle_of(pickle.dumps(np.zeros(2, dtype=[("a", "i4")]), protocol=2)[2:-1]), "numpy dtype 'V4'"),
    (
        "short_data",
        pickle_of(NUMPY_F8.replace(b"X\t\x00\x00\x00\x00\x00\x00\x00\x00\x00\xc3\xb0?", b"X\x02\x00\x00\x00\xc3\xb0")),
        "does not match its shape",
    ),
    ("bare_class", pickle_of(global_("numpy", "ndarray")), "a bare ndarray"),
] + [(name, data, BOMB_MESSAGES.get(name, "asks for more memory")) for name, data in sorted(BOMBS.items())]


@pytest.mark.parametrize("name,data,expected", TRUST_REFUSALS, ids=[r[0] for r in TRUST_REFUSALS])
def test_the_trust_tool_refuses_with_one_line(tmp_path, capsys, name, data, expected):
    rc, err = convert(tmp_path, data, capsys)
    assert rc == 2 and err.count("\n") == 1 and expected in err, err
    assert not (tmp_path / "new.pt").exists()


def test_the_trust_tool_converts_text_arrays(tmp_path, capsys):
    arrays = pickle.dumps(np.array([["ab", "c"]]), protocol=2)[2:-1]
    rc, err = convert(tmp_path, pickle_of(arrays), capsys)
    assert rc == 0, err
    assert safe_torch_load(str(tmp_path / "new.pt"))["x"] == [["ab", "c"]]


@pytest.mark.cli  # starts a command
def test_the_trust_tool_on_crafted_files_from_the_command_line(tmp_path):
    """An object dtype whose flags say plain bytes (numpy read a pointer the file chose: a
    segfault), and a module with import-time effects (it created a folder named after argv)."""
    crafted = {
        "pointer": pickle_of(NUMPY_F8.replace(b"X\x02\x00\x00\x00f8", b"X\x02\x00\x00\x00O8")),
        "import": pickle_of(global_("fairseq.examples.textless_nlp.gslm.unit2speech.multiproc", "os")),
    }
    for name, data in crafted.items():
        src = zip_checkpoint(tmp_path / f"{name}.pt", data)
        proc = subprocess.run([str(BIN / "fairseq-define-trust-checkpoint"), str(src), "NEW.pt"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, (name, proc.returncode, proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr and "GPU log directory" not in proc.stdout
        assert proc.stderr.count("fairseq-define-trust-checkpoint: error:") == 1, proc.stderr[-2000:]
        assert not (tmp_path / "NEW.pt").exists()


def test_a_damaged_checkpoint_is_refused_by_its_crc(tmp_path):
    state = safe_torch_load(str(FAMILIES / "nmt_untied.pt"))
    path = tmp_path / "damaged.pt"
    torch.save(state, path)
    weights = state["model"]["decoder.output_projection.weight"]
    data = bytearray(path.read_bytes())
    at = data.find(weights.numpy().tobytes()[:64])
    assert at > 0
    data[at + 5] ^= 0x10  # one bit of one weight
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointLoadError, match="damaged.* fails its CRC-32 check"):
        checkpoint_utils.load_checkpoint_to_cpu(str(path))

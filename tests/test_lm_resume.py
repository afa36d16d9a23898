"""Resuming the DeFINE language models in the middle of an epoch, through fairseq-train on
a slice of PTB: a run stopped at a mid-epoch checkpoint (``--save-interval-updates``,
``--max-update``) and resumed ends with exactly the parameters and optimizer state of an
uninterrupted run, dropout on. The state carried into the next segment (Transformer-XL
memory, LSTM hidden states) is saved with the data iterator's position; NT-ASGD has switched
to averaging before the stop, and validating between updates leaves training unchanged."""

import logging

import numpy as np
import pytest
import torch
from fairseq.checkpoint_utils import safe_torch_load
from fairseq.data import Dictionary

from fairseq_define.models.define_lm import StreamStateDecoder
from fairseq_define.tasks.contiguous_lm import (
    ContiguousLMTask,
    ContiguousStreamDataset,
    StreamBatchIterator,
    TokenStream,
    training_rows,
)

from .helpers import USER_DIR, binarize_ptb_slice, run_in_process

pytestmark = pytest.mark.cli  # starts fairseq's command-line tools or a recipe

# 79 lines of the PTB-format slice: 2,037 tokens, 4 streams of 26 segments of 20 tokens per epoch
K, N = 32, 40  # the stop (epoch 2, segment 6) and the end
COMMON = ["--user-dir", USER_DIR, "--task", "contiguous_lm", "--tokens-per-sample", "20",
          "--batch-size", "4", "--cpu", "--seed", "5", "--log-format", "simple", "--no-epoch-checkpoints"]
TXL = ["--arch", "define_txl_tiny", "--define-map-dim", "16", "--criterion", "projected_adaptive_loss",
       "--dropout", "0.2", "--attention-dropout", "0.1", "--define-transform", "define",
       "--optimizer", "adam", "--lr", "2e-3"]
LSTM_MODEL = ["--arch", "define_lstm_tiny", "--criterion", "awd_lm_loss", "--clip-norm", "0.25",
              "--dropout", "0.2", "--dropout-hidden", "0.1", "--dropout-input", "0.2",
              "--dropout-embedding", "0.05", "--weight-drop", "0.2", "--define-transform", "define"]
NT_ASGD = ["--optimizer", "nt_asgd", "--lr-scheduler", "nt_asgd", "--nonmono", "0", "--lr", "5"]
MODELS = {"transformer_xl": TXL, "lstm": LSTM_MODEL + NT_ASGD}


@pytest.fixture(scope="module")
def ptb_bin(tmp_path_factory):
    d = tmp_path_factory.mktemp("ptb_resume")
    return binarize_ptb_slice(d, 79, 30)


def train(ptb_bin, model, save_dir, *extra):
    # in process: fairseq-train's own start is tested elsewhere (test_cli_end_to_end.py); one
    # thread: a tiny model on a shared machine runs an order of magnitude faster
    return run_in_process("fairseq-train", ptb_bin, *COMMON, *MODELS[model], "--save-dir", save_dir, *extra,
                   env={"OMP_NUM_THREADS": "1"}).stdout


def assert_same_training_state(got, want):
    """Every parameter and every optimizer tensor bit for bit."""
    assert got["optimizer_history"][-1]["num_updates"] == want["optimizer_history"][-1]["num_updates"]
    assert got["model"].keys() == want["model"].keys()
    for k in want["model"]:
        if k.endswith("._float_tensor"):
            continue  # fairseq's uninitialised buffer
        assert torch.equal(got["model"][k], want["model"][k]), k
    got_opt, want_opt = got["last_optimizer_state"], want["last_optimizer_state"]
    assert got_opt["param_groups"] == want_opt["param_groups"]
    assert got_opt["state"].keys() == want_opt["state"].keys()
    for i, state in want_opt["state"].items():
        for name, value in state.items():
            assert torch.equal(torch.as_tensor(got_opt["state"][i][name]), torch.as_tensor(value)), (i, name)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_mid_epoch_resume_matches_an_uninterrupted_run(model, ptb_bin, tmp_path):
    """The uninterrupted run also validates every 3 updates (each validation runs its own
    stream, and NT-ASGD's swap to the averaged weights is undone before the next step), the
    stopped and resumed one only where it saves: the same training either way."""
    saves = ["--save-interval-updates", str(K)]
    train(ptb_bin, model, tmp_path / "straight", *saves, "--max-update", str(N), "--validate-interval-updates", "3")
    train(ptb_bin, model, tmp_path / "split", *saves, "--max-update", str(K))
    stopped = safe_torch_load(str(tmp_path / "split" / "checkpoint_last.pt"))
    position = stopped["extra_state"]["train_iterator"]
    assert (position["epoch"], position["iterations_in_epoch"]) == (2, K - 26)  # mid-epoch 2
    assert position["stream_state"]["segment"] == K - 26
    if model == "lstm":
        groups = stopped["last_optimizer_state"]["param_groups"]
        assert groups[0]["averaging"] and groups[0]["averaged_steps"] == K - 26  # NT-ASGD switched
    out = train(ptb_bin, model, tmp_path / "split", *saves, "--max-update", str(N))
    assert "Loaded checkpoint" in out and "continues its 4 streams at segment 6" in out
    assert_same_training_state(safe_torch_load(str(tmp_path / "split" / "checkpoint_last.pt")),
                               safe_torch_load(str(tmp_path / "straight" / "checkpoint_last.pt")))


class Carrier(StreamStateDecoder):
    """A decoder's stream bookkeeping alone."""

    def __init__(self):
        super().__init__(Dictionary())
        self.weight = torch.nn.Parameter(torch.zeros(1))


def stream_iterator(decoder, rows=2, segment_len=5, shard=(0, 1)):
    tokens = np.arange(101)
    data = ContiguousStreamDataset("train", tokens, training_rows(len(tokens), rows, 0, rows), segment_len, pad=1)
    return StreamBatchIterator(stream="train", decoder=decoder, layout=(rows, segment_len, len(tokens)),
                               shard=shard, dataset=data, collate_fn=data.collater,
                               batch_sampler=[[i] for i in range(len(data))], disable_shuffling=True)


@pytest.mark.parametrize("resume, restored", [
    ({}, True),
    ({"rows": 4}, False),  # another --batch-size
    ({"segment_len": 4}, False),  # another --tokens-per-sample
    ({"shard": (1, 2)}, False),  # a second GPU: the checkpoint holds the first GPU's streams
])
def test_stream_state_is_saved_with_the_position_and_restored_only_for_its_layout(resume, restored, caplog):
    saving = Carrier()
    itr = stream_iterator(saving)
    epoch = itr.next_epoch_itr(shuffle=False)
    for _ in range(3):
        next(epoch)
    memory = [torch.randn(2, 4, 3)[:, 1:]]  # a slice, as the Transformer-XL keeps it
    saving._stream_memory["train"] = (2, memory)  # not the state before segment 3: not saved
    assert "stream_state" not in itr.state_dict()
    saving._stream_memory["train"] = (3, memory)
    state = itr.state_dict()
    assert state["iterations_in_epoch"] == 3 and state["stream_state"]["segment"] == 3
    assert state["stream_state"]["state"][0].untyped_storage().nbytes() == 2 * 3 * 3 * 4  # compact copy
    loading = Carrier()
    with caplog.at_level(logging.INFO):
        stream_iterator(loading, **resume).load_state_dict(state)
    if restored:
        segment, got = loading._stream_memory["train"]
        assert segment == 3 and torch.equal(got[0], memory[0])
        assert "continues its 2 streams at segment 3" in caplog.text
    else:
        assert "train" not in loading._stream_memory and "from an empty state" in caplog.text


@pytest.mark.parametrize("split", ["train", "valid"])
def test_the_streams_load_in_the_training_process(split):
    """No loader process, whatever --num-workers says: the segments are slices of one array
    in memory, and a worker's shutdown waited torch's 5 s status interval at every epoch's end
    and every checkpoint save (a 32-update run took 11.8 s, now 0.8 s)."""
    from argparse import Namespace

    d = Dictionary()
    task = ContiguousLMTask(Namespace(eval_context=-1, train_subset="train", tokens_per_sample=5, data="",
                                      seed=1, output_dictionary_size=-1), d)
    itr = task.get_batch_iterator(TokenStream(split, np.arange(101)), max_sentences=2, num_workers=4)
    assert isinstance(itr, StreamBatchIterator) and itr.num_workers == 0
    assert len(list(itr.next_epoch_itr(shuffle=False))) == 10  # 2 streams of 10 segments of 5

"""Language modeling on contiguous streams, for models that carry state from one segment
to the next (Transformer-XL memory, LSTM hidden states; paper sections 4.1 and 4.3).

A split's token stream (lines joined, each ending in </s>) is cut into one contiguous stream
per batch row; batch i holds segment i of every row, served in order. Each batch's
``net_input`` names its ``stream`` (the split) and ``segment`` index, so a model restarts
its state where a stream starts (segment 0) and never carries state from training into
validation or back.

Training: B rows per GPU (``--batch-size``, or ``--max-tokens`` / ``--tokens-per-sample``),
equal lengths, the remainder of the stream dropped, as in the reference code.

Evaluation (validation, fairseq-eval-lm): every token of the split but the first is scored
exactly once. Row r scores a contiguous run of whole segments of the single stream and is
first fed, unscored, the ``--eval-context`` tokens that precede it. With the default (the
model's memory span) each scored token of a Transformer-XL sees exactly the computation it
would see in one stream, so the perplexity does not depend on the batch size. An LSTM's
state depends on all the text before it: it is exact with ``--batch-size 1`` (as AWD-LSTM
evaluates); with more rows each row starts from a zero state after its context.

Resuming: a checkpoint saved in the middle of an epoch (``--save-interval-updates``,
``--max-update``) holds, beside the data iterator's position, the state the model carries
into the next segment of each training stream, so the resumed run continues the streams as
an uninterrupted one would (dropout masks follow fairseq's per-update seed).
"""

import logging
import math
import os
from dataclasses import dataclass, field
from typing import List

import numpy as np
import torch
from fairseq.data import FairseqDataset, data_utils, iterators
from fairseq.data.indexed_dataset import MMapIndexedDataset
from fairseq.tasks import register_task
from fairseq.tasks.language_modeling import LanguageModelingConfig, LanguageModelingTask
from omegaconf import II

from ..errors import UserError

logger = logging.getLogger(__name__)


@dataclass
class ContiguousLMConfig(LanguageModelingConfig):
    eval_context: int = field(
        default=-1,
        metadata={
            "help": "evaluation: tokens of preceding text fed (unscored) before each row's "
            "first scored token, rounded up to whole segments; -1: the model's memory span "
            "(layers x mem_len for Transformer-XL), which makes the perplexity independent of "
            "the batch size; 0: none"
        },
    )
    train_subset: str = II("dataset.train_subset")


TOKENS_PER_SAMPLE = ContiguousLMConfig.__dataclass_fields__["tokens_per_sample"].default  # fairseq's default


def stream_tokens(dataset) -> np.ndarray:
    """All tokens of a binarized split in order, as one array."""
    if isinstance(dataset, MMapIndexedDataset):
        # the .bin file is the token stream itself: map it without copying
        tokens = np.frombuffer(dataset._bin_buffer, dtype=dataset._index.dtype)
        if len(tokens) == int(dataset.sizes.sum()):
            return tokens
    return np.concatenate([dataset[i].numpy() for i in range(len(dataset))])


class TokenStream(FairseqDataset):
    """A split as one token stream; the batch layout is made in ``get_batch_iterator``,
    once the number of rows (and the model's memory span) is known."""

    def __init__(self, split: str, tokens: np.ndarray, source=None):
        self.split, self.tokens = split, tokens
        self.source = source  # keeps a memory-mapped file open while ``tokens`` views it

    def __len__(self):
        return len(self.tokens)

    def __getitem__(self, index):
        return self.tokens[index]


class ContiguousStreamDataset(FairseqDataset):
    """Item i is segment i of every row; ``collater`` builds the batch."""

    def __init__(self, split, tokens: np.ndarray, rows: List[tuple], segment_len: int, pad: int):
        # rows: (first input position, scored from this column on, row length), positions
        # index ``tokens``; a row's targets are the tokens one position later
        self.split, self.tokens, self.rows, self.T, self.pad = split, tokens, rows, segment_len, pad
        self.length = max(length for _, _, length in rows)
        self.n_segments = math.ceil(self.length / segment_len)

    def __len__(self):
        return self.n_segments

    def __getitem__(self, index):
        return index

    def num_tokens(self, index):
        return self.T * len(self.rows)

    def size(self, index):
        return self.T

    def collater(self, items):
        (i,) = items
        lo = i * self.T
        width = min(self.T, self.length - lo)
        src = torch.full((len(self.rows), width), self.pad, dtype=torch.long)  # [B, T]
        tgt = torch.full((len(self.rows), width), self.pad, dtype=torch.long)  # [B, T]
        for r, (start, scored_from, length) in enumerate(self.rows):
            hi = min(lo + width, length)
            if hi <= lo:
                continue
            src[r, : hi - lo] = torch.from_numpy(self.tokens[start + lo : start + hi].astype(np.int64))
            tgt[r, : hi - lo] = torch.from_numpy(self.tokens[start + lo + 1 : start + hi + 1].astype(np.int64))
            if scored_from > lo:
                tgt[r, : min(scored_from, hi) - lo] = self.pad  # context only
        return {
            "id": torch.arange(len(self.rows)),
            "nsentences": len(self.rows),
            "ntokens": int(tgt.ne(self.pad).sum()),
            "net_input": {
                "src_tokens": src,
                "src_lengths": src.ne(self.pad).sum(1),
                "stream": self.split,
                "segment": i,
            },
            "target": tgt,
        }


class StreamBatchIterator(iterators.EpochBatchIterator):
    """fairseq's epoch iterator over a stream's segments. Its state, which fairseq saves in a
    checkpoint as ``extra_state["train_iterator"]`` and gives back on resume, also holds in
    the middle of an epoch the model's state for this GPU's streams (``stream_state``)."""

    def __init__(self, *args, stream: str, decoder=None, layout=(), shard=(0, 1), **kwargs):
        super().__init__(*args, **kwargs)
        # decoder: a StreamStateMixin (training) or None; layout: what the saved state's
        # rows mean (rows per GPU, segment length, stream tokens)
        self.stream, self.decoder, self.layout, self.shard = stream, decoder, list(layout), list(shard)

    def state_dict(self):
        state = super().state_dict()
        position = state["iterations_in_epoch"]  # 0 at an epoch's end: the streams restart
        entry = self.decoder.stream_state(self.stream) if self.decoder is not None and position else None
        if entry is not None and entry[0] == position:
            state["stream_state"] = {"stream": self.stream, "segment": entry[0], "layout": self.layout,
                                     "shard": self.shard, "state": entry[1]}
        return state

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        saved = state_dict.get("stream_state")
        if saved is None or self.decoder is None:
            return
        if (saved["stream"], saved["segment"], list(saved["layout"])) != \
                (self.stream, state_dict.get("iterations_in_epoch"), self.layout):
            logger.warning(
                "%s: the checkpoint's stream state is for %s rows x segments x tokens (this run: "
                "%s); the streams continue from an empty state", self.stream, saved["layout"], self.layout,
            )
            return
        if list(saved["shard"]) != self.shard:
            # only the first GPU writes the checkpoint, with its own streams' state
            logger.warning(
                "%s: the checkpoint holds the stream state of GPU %d of %d; GPU %d continues its "
                "streams from an empty state", self.stream, saved["shard"][0], saved["shard"][1], self.shard[0],
            )
            return
        self.decoder.load_stream_state(self.stream, saved["segment"], saved["state"])
        logger.info("%s: continues its %d streams at segment %d from the checkpoint's state",
                    self.stream, self.layout[0], saved["segment"])


def training_rows(n_tokens: int, rows: int, shard: int, per_shard: int) -> List[tuple]:
    row_len = (n_tokens - 1) // rows
    return [(r * row_len, 0, row_len) for r in range(shard * per_shard, (shard + 1) * per_shard)]


def evaluation_rows(n_tokens: int, rows: int, shard: int, per_shard: int, T: int, context: int) -> List[tuple]:
    """Row r scores segments [r*S/R, (r+1)*S/R) of the single stream (S segments of T
    inputs), after up to ``context`` unscored tokens (whole segments, so the segment
    boundaries, and with them every attention window, match the single stream's)."""
    n_inputs = n_tokens - 1
    S = math.ceil(n_inputs / T)
    context = math.ceil(max(context, 0) / T) * T
    out = []
    for r in range(shard * per_shard, (shard + 1) * per_shard):
        first, last = (r * S) // rows * T, min(((r + 1) * S) // rows * T, n_inputs)
        warm = min(first, context)
        out.append((first - warm, warm, warm + max(last - first, 0)))
    return out


@register_task("contiguous_lm", dataclass=ContiguousLMConfig)
class ContiguousLMTask(LanguageModelingTask):
    def __init__(self, args, dictionary, output_dictionary=None, targets=None):
        super().__init__(args, dictionary, output_dictionary, targets)
        self.stream_decoder = None
        if args.eval_context < -1:
            raise UserError(
                f"--eval-context {args.eval_context}: give the context in tokens, 0 for none, or -1 "
                "(the default) for the model's memory span"
            )
        self.model_memory_span = None
        self.model_segment_len = None
        self.train_optimizer = None  # from train_step: fairseq gives the task no other way

    def build_model(self, args, from_checkpoint=False):
        model = super().build_model(args, from_checkpoint)
        self.model_memory_span = getattr(model, "memory_span", None)
        # the training streams' state goes into mid-epoch checkpoints (StreamBatchIterator)
        decoder = getattr(model, "decoder", None)
        self.stream_decoder = decoder if hasattr(decoder, "stream_state") else None
        # a model may fix its own segment length (Transformer-XL's tgt_len: the training
        # value, or the one given to fairseq-eval-lm with --model-overrides)
        if hasattr(model, "segment_length"):
            self.model_segment_len = model.segment_length()
            given = self.args.tokens_per_sample
            # a loaded model (eval-lm, the hub) evaluated with another --tokens-per-sample, or
            # the override {'tokens_per_sample': N}: that length. The task's default cannot be
            # told from a value given as the default, so it leaves the model's
            if from_checkpoint and self.model_segment_len and given not in (self.model_segment_len, TOKENS_PER_SAMPLE):
                logger.info("segments of %d tokens (--tokens-per-sample), the model's tgt_len %d set aside",
                            given, self.model_segment_len)
                self.model_segment_len = given
        return model

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False, **kwargs):
        self.train_optimizer = optimizer  # for begin_valid_epoch
        return super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad, **kwargs)

    def begin_valid_epoch(self, epoch, model):
        super().begin_valid_epoch(epoch, model)
        # an optimizer may validate other weights than its iterate (NT-ASGD: the average, as
        # AWD-LSTM does) and put the iterate back before its next step
        begin_validation = getattr(self.train_optimizer, "begin_validation", None)
        if begin_validation is not None:
            begin_validation()

    @property
    def segment_len(self) -> int:
        return self.model_segment_len or self.args.tokens_per_sample

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        paths = self.args.data.split(os.pathsep)
        path = os.path.join(paths[(epoch - 1) % len(paths)], split)
        data = data_utils.load_indexed_dataset(path, self.dictionary, self.args.dataset_impl, combine=combine)
        if data is None:
            raise FileNotFoundError(f"Dataset not found: {split} ({path})")
        tokens = stream_tokens(data)
        if len(tokens) < 2:
            raise UserError(f"split '{split}' in {path} has {len(tokens)} token(s): nothing to predict")
        self.datasets[split] = TokenStream(split, tokens, source=data)
        logger.info("%s: one stream of %d tokens", split, len(tokens))

    def get_batch_iterator(self, dataset, max_tokens=None, max_sentences=None, num_shards=1,
                           shard_id=0, num_workers=0, epoch=1, data_buffer_size=0,
                           skip_remainder_batch=False, **kwargs):
        if not isinstance(dataset, TokenStream):  # sentences given for inference (hub)
            return super().get_batch_iterator(
                dataset, max_tokens=max_tokens, max_sentences=max_sentences, num_shards=num_shards,
                shard_id=shard_id, num_workers=num_workers, epoch=epoch,
                data_buffer_size=data_buffer_size, skip_remainder_batch=skip_remainder_batch, **kwargs
            )
        split, n_tokens, T = dataset.split, len(dataset), self.segment_len
        if not max_sentences and not max_tokens:
            raise UserError("contiguous_lm needs --batch-size (streams per GPU) or --max-tokens")
        if split == self.args.train_subset:
            per_shard = int(max_sentences or max(1, max_tokens // T))
            rows = per_shard * num_shards
            if (n_tokens - 1) // rows < 1:
                raise UserError(
                    f"split '{split}' has {n_tokens} tokens, too few for {rows} streams; "
                    "lower --batch-size"
                )
            layout = training_rows(n_tokens, rows, shard_id, per_shard)
        else:
            context = self.args.eval_context
            if context < 0:
                context = self.model_memory_span(T) if self.model_memory_span else 0
            if max_sentences:
                per_shard = int(max_sentences)
            else:
                # --max-tokens only: rows whose unscored context costs at most ~10% extra
                per_shard = max(1, min(max_tokens // T, n_tokens // (10 * max(context, T) * num_shards)))
            # never more rows than segments (extra rows would be all padding)
            per_shard = max(1, min(per_shard, math.ceil((n_tokens - 1) / T) // num_shards))
            layout = evaluation_rows(n_tokens, per_shard * num_shards, shard_id, per_shard, T, context)
        data = ContiguousStreamDataset(split, dataset.tokens, layout, T, self.dictionary.pad())
        logger.info(
            "%s: %d streams per GPU, %d segments of %d tokens", split, per_shard, len(data), T
        )
        return StreamBatchIterator(
            stream=split,
            decoder=self.stream_decoder if split == self.args.train_subset else None,
            layout=(per_shard, T, n_tokens),
            shard=(shard_id, num_shards),
            dataset=data,
            collate_fn=data.collater,
            batch_sampler=[[i] for i in range(len(data))],
            # the segments are slices of one array in memory: a loader process adds nothing, and
            # its shutdown cost torch's 5 s status interval at every epoch's end and save
            # (its index queue never got the stop signal), whatever --num-workers says
            num_workers=0,
            epoch=epoch,
            buffer_size=data_buffer_size,
            disable_shuffling=True,  # segments must come in order
            skip_remainder_batch=skip_remainder_batch,
        )

    def eval_lm_dataloader(self, dataset, max_tokens=36000, batch_size=None, max_positions=None,
                           num_shards=1, shard_id=0, num_workers=1, data_buffer_size=10,
                           context_window=0):
        if context_window > 0:
            raise UserError(
                "--context-window re-reads overlapping blocks; contiguous_lm keeps the context "
                "in the model's memory instead: drop --context-window and set the memory and the "
                "segment length with --model-overrides \"{'mem_len': 640, 'tgt_len': 64}\""
            )
        return self.get_batch_iterator(
            dataset, max_tokens=max_tokens, max_sentences=batch_size, num_shards=num_shards,
            shard_id=shard_id, num_workers=num_workers, data_buffer_size=data_buffer_size,
        ).next_epoch_itr(shuffle=False)

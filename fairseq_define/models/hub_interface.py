"""The hub interfaces of the DeFINE models: fairseq's GeneratorHubInterface (translate,
sample, generate), plus ``export(path)`` (the model as a checkpoint of fairseq's own
architecture, as fairseq-define-export writes it) and, for define_transformer, scoring a
given translation, which fairseq's ``score`` leaves out for translation tasks."""

import copy

import torch
from fairseq import utils
from fairseq.data import LanguagePairDataset
from fairseq.hub_utils import GeneratorHubInterface
from omegaconf import open_dict

from fairseq_define_patch.installed import check_model_overrides

from ..errors import UserError
from ..output_files import save_checkpoint
from .stock_form import export_state


def from_pretrained(model_cls, interface, model_name_or_path, checkpoint_file, data_name_or_path, **kwargs):
    """fairseq's hub loading (``BaseFairseqModel.from_pretrained``), returning ``interface``."""
    from fairseq import hub_utils

    x = hub_utils.from_pretrained(
        model_name_or_path, checkpoint_file, data_name_or_path, archive_map=model_cls.hub_models(), **kwargs
    )
    # fairseq applies the keyword arguments as overrides and drops a name no setting has (a
    # typo: dropuot=0.3): refused with the closest name, as --model-overrides is on the CLIs
    check_model_overrides(kwargs, x["args"], "from_pretrained")
    return interface(x["args"], x["task"], x["models"])


class ExportHubMixin:
    def export(self, path):
        """Write the model as a checkpoint of fairseq's own architecture (transformer,
        transformer_lm, lstm_lm), which a stock fairseq loads without this plugin:
        what ``fairseq-define-export CHECKPOINT PATH`` writes (docs/inference.md, "Deploy").
        ``path`` must not exist; a model stock fairseq cannot express raises a UserError
        naming why, and so does an ensemble (``checkpoint_file='a.pt:b.pt'``): one file holds one
        model, and writing the first alone lost the others without a word."""
        if len(self.models) != 1:
            raise UserError(
                f"export() writes one model, and this hub holds an ensemble of {len(self.models)} "
                "(checkpoint_file 'a.pt:b.pt'): load each checkpoint alone and export it, or average them "
                "into one first (fairseq-define-average-checkpoints)")
        save_checkpoint(export_state(self.models[0], self.cfg, self.task), path, flag=None)


class LanguageModelHubInterface(ExportHubMixin, GeneratorHubInterface):
    """fairseq's hub interface for the DeFINE language models, with ``export``."""


class TranslationHubInterface(ExportHubMixin, GeneratorHubInterface):
    def score(self, sentences, targets=None, **kwargs):
        """Log-probabilities of ``targets`` given the source ``sentences``, as
        ``fairseq-generate --score-reference`` computes them.

        ``hub.score("the house", targets="das Haus")`` returns a dict with ``tokens`` (the
        binarized target), ``positional_scores`` (natural-log probability of each target
        token, end of sentence included) and ``score`` (their mean); lists of sources and
        targets give a list of dicts. Text goes through the checkpoint's tokenizer and BPE
        like ``translate``'s input.
        """
        if targets is None:
            raise ValueError(
                "a translation model scores a target given a source: "
                "call score(sources, targets=...)"
            )
        single = isinstance(sentences, str)
        if single != isinstance(targets, str):
            raise ValueError("pass one source and one target string, or two lists of the same length")
        sources, targets = ([sentences], [targets]) if single else (list(sentences), list(targets))
        if len(sources) != len(targets):
            raise ValueError(f"{len(sources)} sources but {len(targets)} targets: pass one target per source")
        src = [self.encode(s) for s in sources]  # [S_i] each
        tgt = [
            self.tgt_dict.encode_line(self.apply_bpe(self.tokenize(t)), add_if_not_exist=False).long()
            for t in targets
        ]  # [T_i] each, ending in </s>
        dataset = LanguagePairDataset(
            src, [len(s) for s in src], self.src_dict, tgt, [len(t) for t in tgt], self.tgt_dict,
            left_pad_source=self.cfg.task.left_pad_source, left_pad_target=self.cfg.task.left_pad_target,
        )
        gen_args = copy.deepcopy(self.cfg.generation)
        with open_dict(gen_args):
            gen_args.score_reference = True
            for k, v in kwargs.items():
                setattr(gen_args, k, v)
        scorer = self.task.build_generator(self.models, gen_args)  # a SequenceScorer
        batches = self.task.get_batch_iterator(
            dataset=dataset,
            max_tokens=self.cfg.dataset.max_tokens,
            max_sentences=self.cfg.dataset.batch_size,
            max_positions=self.max_positions,
            ignore_invalid_inputs=False,
            disable_iterator_cache=True,
        ).next_epoch_itr(shuffle=False)
        results = [None] * len(src)
        for batch in batches:
            batch = utils.apply_to_sample(lambda t: t.to(self.device), batch)
            with torch.no_grad():
                hypos = self.task.inference_step(scorer, self.models, batch)
            for i, hypo in zip(batch["id"].tolist(), hypos):
                results[i] = {k: v for k, v in hypo[0].items() if k in ("tokens", "score", "positional_scores")}
        return results[0] if single else results

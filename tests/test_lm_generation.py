"""Generation from the DeFINE language models (Transformer-XL, LSTM, transformer_lm): fairseq's
SequenceGenerator with beam search and sampling, in process, through the hub and through
``fairseq-generate --task language_modeling``, against recomputation from scratch:

- beam 1 equals greedy decoding from full forward passes (no incremental state);
- every hypothesis of a beam (or of sampling) scores, token by token, what a full forward
  pass over that hypothesis gives, which holds only if the incremental state (memory,
  hidden state) follows its hypothesis when the beam is reordered;
- reordering the incremental state equals recomputing each reordered row from scratch.
"""

import math
import re

import pytest
import torch
from fairseq import search
from fairseq.sequence_generator import SequenceGenerator

from .helpers import ADAPTIVE, USER_DIR, binarize_ptb_slice, run_in_process, tiny_lm, tiny_lstm, tiny_model


def sharpened(model):
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.mul_(1.5) if "weight" in name else p.normal_(0, 0.3)  # peaked, varied distributions
    return model.eval()


def txl():
    torch.manual_seed(0)
    return sharpened(tiny_model(vocab=40, mem_len=32, define_transform="define", define_expand_dim=32,
                                define_depth=2))


def lstm():
    torch.manual_seed(0)
    return sharpened(tiny_lstm(vocab=40, define_transform="define"))


def transformer_lm():
    torch.manual_seed(0)
    return sharpened(tiny_lm(vocab=40, **ADAPTIVE))


MODELS = {"transformer_xl": txl, "lstm": lstm, "transformer_lm": transformer_lm}


def full_scores(model, tokens):
    """log p(tokens[i] | eos, tokens[:i]) for every i, by one forward pass from scratch: [L]."""
    eos = model.decoder.dictionary.eos()
    src = torch.cat([torch.tensor([eos]), tokens[:-1]])[None]  # [1, L]
    with torch.no_grad():
        lp = model.get_normalized_probs(model(src), log_probs=True)[0]  # [L, V]
    return lp.gather(-1, tokens[:, None]).squeeze(-1)


def greedy(model, prefix, max_len):
    """Greedy continuation by full forward passes, with SequenceGenerator's rules: no pad,
    eos forced at max_len; returns the tokens after eos-as-bos, eos included."""
    d = model.decoder.dictionary
    tokens = list(prefix)
    while len(tokens) < max_len:
        src = torch.tensor([[d.eos()] + tokens])
        with torch.no_grad():
            lp = model.get_normalized_probs(model(src), log_probs=True)[0, -1]  # [V]
        lp[d.pad()] = -math.inf
        tokens.append(int(lp.argmax()))
        if tokens[-1] == d.eos():
            return torch.tensor(tokens)
    return torch.tensor(tokens + [d.eos()])


def generate(model, prefixes, **kwargs):
    d = model.decoder.dictionary
    if kwargs.pop("sampling", False):
        kwargs["search_strategy"] = search.Sampling(d, sampling_topk=kwargs.pop("sampling_topk"))
    gen = SequenceGenerator([model], d, **kwargs)
    src = torch.cat([torch.full((len(prefixes), 1), d.eos()), torch.stack(prefixes)], 1)  # [B, 1 + P]
    sample = {"net_input": {"src_tokens": src, "src_lengths": torch.full((len(prefixes),), src.size(1))}}
    with torch.no_grad():
        return gen.generate([model], sample, prefix_tokens=src[:, 1:], bos_token=d.eos())


def prefixes(n=3, length=3):
    torch.manual_seed(7)
    return list(torch.randint(4, 40, (n, length)))


@pytest.mark.parametrize("name", list(MODELS))
def test_beam_1_is_greedy_from_full_forward_passes(name):
    model = MODELS[name]()
    max_len = 12
    for prefix, hypos in zip(prefixes(), generate(model, prefixes(), beam_size=1, max_len_b=max_len)):
        want = greedy(model, prefix.tolist(), max_len)
        assert torch.equal(hypos[0]["tokens"], want)
        torch.testing.assert_close(hypos[0]["positional_scores"], full_scores(model, want), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("search", [dict(beam_size=4), dict(beam_size=3, sampling=True, sampling_topk=6)])
def test_every_hypothesis_scores_what_recomputation_gives(name, search):
    model = MODELS[name]()
    torch.manual_seed(0)
    results = generate(model, prefixes(), max_len_b=12, **search)
    distinct = 0
    for prefix, hypos in zip(prefixes(), results):
        assert len(hypos) == search["beam_size"]
        distinct += len({tuple(h["tokens"].tolist()) for h in hypos})
        for h in hypos:
            assert torch.equal(h["tokens"][:3], prefix)
            torch.testing.assert_close(h["positional_scores"], full_scores(model, h["tokens"]), atol=1e-5, rtol=1e-5)
    assert distinct > len(results)  # the beams hold different continuations


@pytest.mark.parametrize("name", list(MODELS))
def test_reordered_incremental_state_equals_recomputation(name):
    model = MODELS[name]()
    torch.manual_seed(1)
    tokens = torch.randint(4, 40, (3, 7))
    order = torch.tensor([2, 0, 2])  # a beam step: row 2 continued twice, row 1 dropped
    state = {}
    with torch.no_grad():
        for t in range(5):
            model.decoder(tokens[:, :t + 1], incremental_state=state)
        model.decoder.reorder_incremental_state_scripting(state, order)
        new = tokens[order]
        new[:, 5] = torch.tensor([5, 6, 7])  # each reordered row continues differently
        got = model.decoder(new[:, :6], incremental_state=state)[0][:, -1]
        want = model.decoder(new[:, :6])[0][:, -1]
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


# -- through the hub and fairseq-generate, on checkpoints trained by fairseq-train ---------------

COMMON = ["--user-dir", USER_DIR, "--tokens-per-sample", "8", "--cpu",
          "--optimizer", "adam", "--lr", "3e-3", "--batch-size", "4", "--max-update", "4", "--disable-validation",
          "--no-epoch-checkpoints", "--log-format", "simple", "--seed", "2"]
ARCHS = {
    "transformer_xl": ["--task", "contiguous_lm", "--arch", "define_txl_tiny", "--criterion", "projected_adaptive_loss",
                       "--dropout", "0", "--mem-len", "64", "--define-transform", "define"],
    "lstm": ["--task", "contiguous_lm", "--arch", "define_lstm_tiny", "--criterion", "projected_adaptive_loss",
             "--define-transform", "define"],
    # fairseq's own task and adaptive loss; positions beyond the 8-token training blocks
    "transformer_lm": ["--task", "language_modeling", "--arch", "define_transformer_lm_tiny", "--max-target-positions",
                       "64", "--adaptive-input", "--adaptive-input-cutoff", "200,800", "--criterion", "adaptive_loss",
                       "--ddp-backend", "legacy_ddp"],
}


@pytest.fixture(scope="module")
def lm_checkpoints(tmp_path_factory):
    d = tmp_path_factory.mktemp("lm_gen")
    binarize_ptb_slice(d, 300, 3)
    for name, arch in ARCHS.items():
        run_in_process("fairseq-train", d / "bin", *COMMON, *arch, "--save-dir", d / name)
    return d


def load(name, d):
    from fairseq_define.models.define_transformer_lm import DefineTransformerLanguageModel
    from fairseq_define.models.lstm_lm import LSTMLanguageModel
    from fairseq_define.models.transformer_xl import TransformerXLLanguageModel

    cls = {"transformer_xl": TransformerXLLanguageModel, "lstm": LSTMLanguageModel,
           "transformer_lm": DefineTransformerLanguageModel}[name]
    return cls.from_pretrained(str(d / name), "checkpoint_last.pt", data_name_or_path=str(d / "bin"))


@pytest.mark.parametrize("name", list(ARCHS))
def test_hub_generation_equals_recomputation(name, lm_checkpoints):
    lm = load(name, lm_checkpoints)
    model = lm.models[0]
    prompt = lm.encode("the company said")[:-1]  # without the trailing eos
    max_len = 10
    (best,) = lm.generate([prompt], beam=1, max_len_b=max_len)
    assert torch.equal(best[0]["tokens"], greedy(model, prompt.tolist(), max_len))
    torch.manual_seed(0)
    for kwargs in (dict(beam=4), dict(beam=3, sampling=True, sampling_topk=20)):
        (hypos,) = lm.generate([prompt], max_len_b=max_len, **kwargs)
        assert len(hypos) == kwargs["beam"] and len({tuple(h["tokens"].tolist()) for h in hypos}) > 1
        for h in hypos:
            assert torch.equal(h["tokens"][:3], prompt)
            torch.testing.assert_close(h["positional_scores"], full_scores(model, h["tokens"]), atol=1e-5, rtol=1e-5)
    text = lm.sample("the company said", beam=1, max_len_b=max_len)
    assert text == lm.decode(best[0]["tokens"])


def generated(out):
    """{sentence id: [(tokens, positional scores in base 2)]} from fairseq-generate's H/P lines."""
    hypos = {}
    for sid, text in re.findall(r"^H-(\d+)\t\S+\t(.*)$", out, flags=re.M):
        hypos.setdefault(int(sid), []).append([text])
    for sid, scores in re.findall(r"^P-(\d+)\t(.*)$", out, flags=re.M):
        next(h for h in hypos[int(sid)] if len(h) == 1).append([float(x) for x in scores.split()])
    return hypos


@pytest.mark.parametrize("name", list(ARCHS))
def test_fairseq_generate_beam_search_on_the_language_modeling_task(name, lm_checkpoints):
    """fairseq-generate continues each validation sentence (its tokens are the prefix) with
    beam 3: every hypothesis scores what recomputation gives (printed in base 2 with 4
    decimals), and the best continues the sentence."""
    d = lm_checkpoints
    lm = load(name, d)
    model, vocab = lm.models[0], lm.task.source_dictionary
    out = generated(run_in_process(
        "fairseq-generate", d / "bin", "--user-dir", USER_DIR, "--task", "language_modeling",
        "--path", d / name / "checkpoint_last.pt", "--gen-subset", "valid", "--cpu", "--batch-size", "1",
        "--sample-break-mode", "eos", "--tokens-per-sample", "512", "--beam", "3", "--nbest", "3",
        "--max-len-a", "1", "--max-len-b", "4").stdout)
    sentences = (d / "valid.txt").read_text(encoding="utf-8").splitlines()
    assert sorted(out) == list(range(len(sentences)))
    for sid, hypos in out.items():
        prefix = vocab.encode_line(sentences[sid], add_if_not_exist=False).long()[:-1]
        assert len(hypos) == 3 and len({text for text, _ in hypos}) == 3
        for text, scores in hypos:
            tokens = vocab.encode_line(text, add_if_not_exist=False).long()  # ends in eos
            assert torch.equal(tokens[:len(prefix)], prefix) and len(tokens) > len(prefix)
            want = full_scores(model, tokens) / math.log(2)
            torch.testing.assert_close(torch.tensor(scores), want, atol=1e-4, rtol=0)

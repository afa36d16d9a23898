"""Study 4: fairseq's own transformer_lm on WikiText-2, its input-output layers swapped. At
equal updates, how does DeFINE on an adaptive input of width n compare with Baevski & Auli's
adaptive input (fairseq's implementation, tied adaptive softmax) and with the projective
baseline at the same n, and what does each save against a standard tied table?

  Command:   make study-tlm    (python -m studies.lm_transformer_wikitext2 [--arms "a b"] [--updates U]
             [--jobs 2]; --help). Resumable: a rerun skips finished arms, resumes a cut one.
  Hardware:  2 CPU cores, no GPU. 9 arms of 1,000 updates (16 blocks of 64 tokens: half an
             epoch) and seed 2 of the best (valid) DeFINE, projective and adaptive-input arms
             and of the equal-size pairs' arms (a recorded seed stays in the report),
             each capped at 40 minutes (a guard: every arm should reach the 1,000), plus
             fairseq-eval-lm on full valid and test. About one hour with --jobs 2 (two without): on one thread an arm
             runs 0.6 s an update with adaptive input and 1.6 s for the standard arm (a full
             33K softmax). Half an epoch because at a quarter validation perplexity is still
             above 400 (a run stopped there), too early to rank the arms.
  Recipe:    one for every arm: --task language_modeling (fairseq's, blocks of 64 tokens,
             --sample-break-mode none), 4 layers, d = 256, 4 heads, inner 1024, dropout 0.1,
             pre-norm (as fairseq's named transformer_lm architectures; --arch transformer_lm
             alone is post-norm),
             Adam lr 1e-3, cosine over the budget after 50 warmup updates, clip 0.25,
             --ddp-backend legacy_ddp (adaptive_loss needs it), validation every 100 updates,
             seed 1; checkpoint_last (the schedule's end) scored by fairseq-eval-lm with
             blocks of 64 tokens and a context window of 32 (each token scored after 32-63).
  Arms:      standard: transformer_lm, a tied 256-dim table, full softmax (cross_entropy);
             adaptive: transformer_lm with fairseq's adaptive input and adaptive softmax
             (bands 4000, 20000, factor 4: widths 256/64/16, tied tables and projections;
             adaptive_loss); at n = 128 and 64: define_transformer_lm_small with an adaptive input
             of width n (same bands and factor) and the DeFINE unit n -> 256 (paper style,
             k = 1024, N = 3), or the projective baseline (one linear n -> 256), the
             adaptive softmax tied at n (adaptive_loss); at n = 128 the probe of the output's
             width: DeFINE with fairseq's adaptive softmax of its own at d (same bands and
             factor, untied: --define-output-layer untied). The equal-size pairs (issue 52):
             fairseq's adaptive input grown to that arm's size by its factor (1.9: bands
             256/134/70, 7.38M against 7.42M), and DeFINE at n = 64 with its own adaptive softmax
             at 112 (a d -> 112 projection; bands 112/28/7) at the adaptive arm's size (5.51M).
  Expected:  as measured here (docs/studies.md), test ppl: DeFINE 307.8 at 5.17M vs
             projective 316.6 at 4.36M at n = 128 (seed 2: 306.9 vs 320.2), 348.3 vs 373.9 at
             n = 64; fairseq's adaptive input 282.6 at 5.51M (seed 2: 280.6); the standard table
             282.2 at 11.68M; DeFINE at n = 128 with its own softmax at d 263.1 at 7.42M (seed 2:
             263.8). The equal-size pairs: adaptive input grown to 7.38M 265.1 (seed 2: 265.8);
             DeFINE at n = 64 with its own softmax at 112, 5.51M, 277.8 (seed 2: 284.8). About 100 minutes for the first
             eleven runs with --jobs 2 on 2 idle cores; the equal-size arms 32 minutes each on
             one thread beside other work.
  Longer:    the equal-size pairs at 3,000 updates (issue 52), in their own folders: --arms
             "adaptive_d256 define_untied_n64_o112 adaptive_d256_f1.9 define_untied_n128"
             --no-second-seed --updates 3000 --minutes 200 --workdir
             work/studies/lm_transformer_wikitext2_u3000 --out
             docs/studies/lm_transformer_wikitext2/u3000; 30-39 minutes an arm on one thread
             (--arms 'ARM_s2' for seed 2). Expected, test ppl, seeds 1 / 2: adaptive input
             153.6 / 154.2 at 7.38M vs DeFINE 161.8 / 163.2 at 7.42M; adaptive input
             165.4 / 162.9 at 5.51M vs DeFINE 179.5 / 182.5 at 5.51M.
  Paper:     no Transformer LM rows in DeFINE's paper; its abstract cites adaptive input
             (Baevski & Auli 2019: transformer_lm_wiki103, 247M parameters, 18.7 test
             perplexity on WikiText-103). Table 2 (Transformer-XL, WikiText-103), test
             perplexity: projective / DeFINE n=128 29.16 / 26.33, n=64 33.74 / 29.10.
  Output:    docs/studies/lm_transformer_wikitext2/{results.md,params_vs_quality.png,
             valid_curves.png}; runs in work/studies/lm_transformer_wikitext2/<arm>/.
"""

from typing import Dict, List, Sequence

from .common import Arm
from .lm import LMStudy, run

CUTOFF = "4000,20000"  # WikiText-2's 33,278 types: about 12% and 60% in the first two bands
ADAPTIVE_LOSS = ("--criterion", "adaptive_loss")


def sizes(quick: bool) -> tuple:
    layers, d, heads, ffn = (2, 32, 2, 64) if quick else (4, 256, 4, 1024)
    return ("--decoder-layers", str(layers), "--decoder-embed-dim", str(d), "--decoder-attention-heads", str(heads),
            "--decoder-ffn-embed-dim", str(ffn))


def adaptive_arm(size: tuple, d: int, cutoff: str) -> Arm:
    """fairseq's transformer_lm with its adaptive input and adaptive softmax (tables and
    projections tied) at width d, bands ``cutoff``, factor 4: Baevski & Auli's form (study 5
    adds DeFINE on it)."""
    dims = ("--decoder-input-dim", str(d), "--decoder-output-dim", str(d))  # transformer_lm keeps 512 unless set
    return Arm(
        f"adaptive_d{d}",
        "adaptive input",
        "transformer_lm",
        size
        + dims
        + (
            "--adaptive-input",
            "--adaptive-input-cutoff",
            cutoff,
            "--adaptive-softmax-cutoff",
            cutoff,
            "--tie-adaptive-weights",
            "--tie-adaptive-proj",
        )
        + ADAPTIVE_LOSS,
        d,
        d,
        sized=len(size),
    )


def arms(quick: bool) -> List[Arm]:
    # quick: 2 layers, d = 32, n = 16, k = 64 (the tiny architecture's unit) on slices
    d, ns, k, cutoff = (32, (16,), 64, "200,800") if quick else (256, (128, 64), 1024, CUTOFF)
    size = sizes(quick)
    dims = ("--decoder-input-dim", str(d), "--decoder-output-dim", str(d))  # transformer_lm keeps 512 unless set
    adaptive = ("--adaptive-input", "--adaptive-input-cutoff", cutoff)
    out = [
        Arm(f"standard_d{d}", "standard", "transformer_lm",
            size + dims + ("--share-decoder-input-output-embed",), d, d, sized=len(size)),
        adaptive_arm(size, d, cutoff),
    ]
    for n in ns:
        unit = ("--define-map-dim", str(n), "--define-expand-dim", str(k), "--define-depth", "3")
        out.append(Arm(f"projective_n{n}", "projective", "define_transformer_lm_small",
                       size + adaptive + unit + ("--define-transform", "projective") + ADAPTIVE_LOSS, d, n,
                       sized=len(size)))
        out.append(Arm(f"define_n{n}", "DeFINE", "define_transformer_lm_small",
                       size + adaptive + unit + ("--define-transform", "define", "--define-style", "paper")
                       + ADAPTIVE_LOSS, d, n, sized=len(size)))
    # the probe of the input-output layer's width (at the deciding n): DeFINE's softmax at d, of
    # its own (fairseq's adaptive softmax with the same bands and factor, untied). Tied to the
    # unit's outputs (tied_unit, at about the adaptive arm's size) is not an arm: its unit runs
    # over all 33K types each step, 20 s an update here (docs/studies.md)
    n = ns[0]
    unit = ("--define-map-dim", str(n), "--define-expand-dim", str(k), "--define-depth", "3",
            "--define-transform", "define", "--define-style", "paper")
    out.append(Arm(f"define_untied_n{n}", "DeFINE, own softmax", "define_transformer_lm_small",
                   size + adaptive + unit + ("--define-output-layer", "untied") + ADAPTIVE_LOSS, d, n, sized=len(size)))
    if quick:
        return [out[1], next(a for a in out if a.family == "DeFINE")]
    # the equal-size pairs (issue 52). Up: fairseq's adaptive input grown to define_untied_n128's
    # size by its factor (bands d / f^i, tied softmax alike), the one knob of the input-output
    # layers alone; a wider d would grow the context model every arm shares. Down: DeFINE with
    # a softmax of its own at the adaptive arm's size: the study's other n and its own adaptive
    # softmax narrower than d (--decoder-output-dim: a d -> w projection), bands and factor as
    # the recipe's; a larger softmax factor instead would leave the last band 1 dim wide
    out.append(Arm(f"adaptive_d{d}_f{GROWN_FACTOR}", "adaptive input", "transformer_lm",
                   size + dims + adaptive + ("--adaptive-input-factor", GROWN_FACTOR, "--adaptive-softmax-cutoff",
                                             cutoff, "--adaptive-softmax-factor", GROWN_FACTOR,
                                             "--tie-adaptive-weights", "--tie-adaptive-proj") + ADAPTIVE_LOSS,
                   d, d, sized=len(size)))
    n, w = ns[1], OWN_SOFTMAX_WIDTH
    unit = ("--define-map-dim", str(n), "--define-expand-dim", str(k), "--define-depth", "3",
            "--define-transform", "define", "--define-style", "paper")
    out.append(Arm(f"define_untied_n{n}_o{w}", "DeFINE, own softmax", "define_transformer_lm_small",
                   size + adaptive + unit + ("--define-output-layer", "untied", "--decoder-output-dim", str(w))
                   + ADAPTIVE_LOSS, d, n, sized=len(size)))
    return out


# the equal-size pairs, adaptive input's arm first (tests/test_studies.py builds both and holds
# each within 3%), at WikiText-2's dictionary: 33,278 types and fairseq's 4 special symbols
EQUAL_SIZE_PAIRS = (("adaptive_d256_f1.9", "define_untied_n128"), ("adaptive_d256", "define_untied_n64_o112"))
VOCAB = 33_282
GROWN_FACTOR = "1.9"  # adaptive input's bands 256/134/70: 7.38M against define_untied_n128's 7.42M
OWN_SOFTMAX_WIDTH = 112  # DeFINE n = 64 with its own adaptive softmax at 112 (112/28/7): 5.51M, as adaptive_d256


def curve_means(name: str, arms: Sequence[Arm], results: Dict[str, dict]) -> Dict[int, float]:
    """The validation curve of arm NAME, the mean over its recorded seeds at each update."""
    curves = [dict(results[a.id]["valid_curve"]["points"]) for a in arms if a.name == name and a.id in results]
    updates = sorted(set.intersection(*(set(c) for c in curves))) if curves else []
    return {u: sum(c[u] for c in curves) / len(curves) for u in updates}


def equal_size_section(arms: Sequence[Arm], results: Dict[str, dict]) -> str:
    """The equal-size pairs over training (issue 52): each pair's validation perplexity (the
    mean of its seeds) at every validation, the gap between them, and how much each curve
    still fell over the last 100 and 300 updates: a ranking that holds while the gap stays
    put is one a longer budget is unlikely to turn (the cosine schedule flattens every curve
    at its end, so a flat end alone does not say the runs have converged)."""
    lines = ["", "## The equal-size pairs over training", "",
             "Validation perplexity (mean of the recorded seeds) at each validation; gap: DeFINE's against "
             "adaptive input's (negative: DeFINE lower).", ""]
    for first, second in EQUAL_SIZE_PAIRS:
        a, b = curve_means(first, arms, results), curve_means(second, arms, results)
        shared = sorted(set(a) & set(b))
        if not shared:
            lines += [f"{first} against {second}: not both recorded yet.", ""]
            continue
        seeds = {x: sum(1 for arm in arms if arm.name == x and arm.id in results) for x in (first, second)}
        lines += [f"| update | {first} (seeds: {seeds[first]}) | {second} (seeds: {seeds[second]}) | gap |",
                  "|---:|---:|---:|---:|"]
        lines += [f"| {u} | {a[u]:.1f} | {b[u]:.1f} | {100 * (b[u] / a[u] - 1):+.1f}% |" for u in shared]
        last = shared[-1]
        falls = []
        for name, c in ((first, a), (second, b)):
            for back in (100, 300):
                if last - back in c:
                    falls.append(f"{name} {100 * (1 - c[last] / c[last - back]):.1f}% over the last {back}")
        lines += ["", "Fall of the curves: " + "; ".join(falls) + ".", ""]
    return "\n".join(lines)


def recipe(updates: int, quick: bool) -> List[str]:
    warmup = 2 if quick else 50
    # blocks of 64 in quick mode too: the model's positions must cover the evaluation's blocks
    return [
        "--task",
        "language_modeling",
        "--tokens-per-sample",
        "64",
        "--sample-break-mode",
        "none",
        "--batch-size",
        "16",
        "--dropout",
        "0.1",
        "--decoder-normalize-before",
        "--optimizer",
        "adam",
        "--lr",
        "1e-3",
        "--lr-scheduler",
        "cosine",
        "--warmup-updates",
        str(warmup),
        "--warmup-init-lr",
        "1e-7",
        "--lr-period-updates",
        str(max(updates - warmup, 1)),
        "--clip-norm",
        "0.25",
        "--ddp-backend",
        "legacy_ddp",
        "--no-epoch-checkpoints",
        "--validate-interval-updates",
        str(max(updates // 2, 1) if quick else 100),
    ]


STUDY = LMStudy(
    name="lm_transformer_wikitext2",
    title="Study 4: WikiText-2, fairseq's transformer_lm with adaptive input, DeFINE and projective input layers",
    doc=__doc__, dataset="wikitext-2",
    arms=arms, recipe=recipe,
    # fairseq-eval-lm as for fairseq's own transformer_lm (the last --task wins over lib.sh's)
    eval_args=("--task", "language_modeling", "--tokens-per-sample", "64", "--context-window", "32",
               "--batch-size", "8"),
    checkpoint="checkpoint_last.pt", updates=1000, minutes=40,
    second_seed_families=("DeFINE", "projective", "adaptive input"),
    report_extra=equal_size_section,
    header_lines=["Context model (every arm): fairseq's transformer_lm decoder, 4 layers, d = 256, 4 heads, "
                  "inner 1024; the arms differ only in the input-output layers."],
)

if __name__ == "__main__":
    run(STUDY)

"""Study 3: perplexity against parameters on WikiText-2 with Transformer-XL. At equal n, is
DeFINE on the projected adaptive input better than the projection alone, and what does each
save against the standard model (n = d_model)?

  Command:   make study-wt2       (python -m studies.lm_wikitext2 [--arms "a b"] [--updates U]; --help)
  Hardware:  2 CPU cores, no GPU. 6 arms of 700 updates (16 x 64 tokens) and seed 2 of the
             best (valid) standard, DeFINE (paper) and projective arms, capped at 13 minutes
             each, plus about 3 minutes of evaluation an arm (full valid and test, with
             memory): 61 minutes measured here for the nine runs with --jobs 2 (two at a
             time, one thread each, 8-9 minutes of training an arm; --minutes 30 where the
             machine is shared).
  Recipe:    one for every arm, as examples/txl_wikitext2 trains: define_txl_small (4 layers,
             d = 256, 4 heads of 64, inner 1024, adaptive input and softmax with cutoffs
             4000, 20000, div_val 1, tgt = mem = 64), projected_adaptive_loss, Adam lr 1e-3,
             cosine over the budget after 200 warmup updates, clip 0.25, validation every 100
             updates, seed 1; checkpoint_last (the schedule's end, as Dai et al. and Table 2's
             recipe evaluate) scored by fairseq-eval-lm with segments of 64, memory 128,
             clamp 128, same length.
  Arms:      standard n = d = 256; at n = 128 and 64: projective (the adaptive input n
             projected to d, --define-transform none) and DeFINE on the projection
             (--define-transform define, k = 1024, N = 3, --define-style paper); the authors'
             unit at n = 128 (--define-style authors). Every arm runs at the defaults a user
             gets.
  Expected:  as measured here (docs/studies.md), test ppl: DeFINE (paper's unit) 327.9 at
             8.83M vs projective 365.7 at 7.81M at n = 128 (seed 2: 325.4 vs 360.9), 390.3
             vs 440.8 at n = 64; the authors' unit 326.6; standard n = 256 314.3 at 11.97M.
  Paper:     Table 2 (WikiText-103, 16 layers, GPUs), test perplexity: standard n=384 27.06;
             projective / DeFINE n=128 29.16 / 26.33, n=64 33.74 / 29.10.
  Output:    docs/studies/lm_wikitext2/{results.md,params_vs_quality.png,valid_curves.png};
             runs in work/studies/lm_wikitext2/<arm>/.
"""

from typing import List

from .common import Arm
from .lm import LMStudy, run


def arms(quick: bool) -> List[Arm]:
    # quick: define_txl_tiny, 2 layers, d = 32
    arch, d, ns = ("define_txl_tiny", 32, (16,)) if quick else ("define_txl_small", 256, (128, 64))
    out = [Arm(f"standard_n{d}", "standard", arch, ("--define-map-dim", str(d), "--define-transform", "none"), d, d)]
    for n in ns:
        out.append(Arm(f"projective_n{n}", "projective", arch,
                       ("--define-map-dim", str(n), "--define-transform", "none"), d, n))
        out.append(Arm(f"define_paper_n{n}", "DeFINE (paper)", arch,
                       ("--define-map-dim", str(n), "--define-transform", "define", "--define-style", "paper"), d, n))
        if n == ns[0] and not quick:
            out.append(Arm(f"define_authors_n{n}", "DeFINE (authors)", arch,
                           ("--define-map-dim", str(n), "--define-transform", "define", "--define-style",
                            "authors"), d, n))
    if quick:
        return [out[0], next(a for a in out if a.family == "DeFINE (paper)")]
    return out


def recipe(updates: int, quick: bool) -> List[str]:
    warmup = 2 if quick else 200
    return ["--task", "contiguous_lm", "--criterion", "projected_adaptive_loss", "--tokens-per-sample",
            "16" if quick else "64", "--batch-size", "16", "--optimizer", "adam", "--lr", "1e-3", "--lr-scheduler",
            "cosine", "--warmup-updates", str(warmup), "--warmup-init-lr", "1e-7", "--lr-period-updates",
            str(max(updates - warmup, 1)), "--clip-norm", "0.25", "--no-epoch-checkpoints",
            "--validate-interval-updates", str(max(updates // 2, 1) if quick else 100)]


STUDY = LMStudy(
    name="lm_wikitext2", title="Study 3: WikiText-2, perplexity against parameters (Transformer-XL)",
    doc=__doc__, dataset="wikitext-2",
    arms=arms, recipe=recipe,
    eval_args=("--batch-size", "10", "--model-overrides",
               "{'tgt_len': 64, 'mem_len': 128, 'clamp_len': 128, 'same_length': True}"),
    checkpoint="checkpoint_last.pt", updates=700, minutes=13,
    second_seed_families=("standard", "DeFINE (paper)", "projective"),
    header_lines=["Model (every arm): define_txl_small, 4 layers, d = 256, adaptive input/softmax (cutoffs 4000, "
                  "20000) n wide, projected to d; DeFINE k = 1024, N = 3."],
)

if __name__ == "__main__":
    run(STUDY)

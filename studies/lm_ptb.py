"""Study 2: perplexity against parameters on Penn Treebank with an AWD-LSTM-style model and
AWD-LSTM's optimizer. At equal n, which input-output layer is better: a standard tied table,
DeFINE (paper or authors' unit) or the projective map?

  Command:   make study-ptb       (python -m studies.lm_ptb [--arms "a b"] [--updates U]; --help)
  Hardware:  2 CPU cores, no GPU. 7 arms of 1,500 updates (20 x 70 tokens, about 2.3 epochs)
             and seed 2 of the best (valid) standard, DeFINE (paper) and projective arms,
             capped at 13 minutes each, plus about 1 minute of evaluation an arm (batch 1, the
             state carried through the split): 64 minutes measured here for the 7 arms (10-12
             minutes an arm on one or two threads; --minutes 30 where the machine is shared),
             and 24 more for the three second seeds (--jobs 2 on idle cores, 11-13 minutes an arm).
  Recipe:    one for every arm: define_lstm_small (2 LSTM layers of 512, the last n wide,
             AWD-LSTM's dropouts scaled down: output 0.3, hidden 0.2, input 0.3, embedding
             0.05, weight drop 0.3), output tied at n; awd_lm_loss (AR 2, TAR 1), BPTT 70,
             batch 20, AWD-LSTM's optimizer as the project's Table 1c recipe runs it
             (run_scripts/lib.sh, awd_ptb): --optimizer nt_asgd --lr-scheduler nt_asgd --lr 30
             --nonmono 5 --clip-norm 0.25; every DeFINE setting at the default a user gets (the
             unit's gradients scaled by 0.01 for both styles, --define-unit-centring batch_mean,
             --lstm-input-centring embedding; docs/stability.md), validation every 250
             updates (NT-ASGD's trigger), seed 1; checkpoint_best (the averaged weights once
             NT-ASGD averages) scored on the full valid and test splits.
  Arms:      standard table n = m = 256 and n = m = 128 (the AWD-LSTM baseline); at n = 128 and
             64 (m = 256, k = 512, N = 3): DeFINE --define-style paper, the authors' unit at
             n = 128, and --define-transform projective.
  Expected:  as measured here (docs/studies.md), test ppl seed 1 / seed 2: DeFINE (paper's
             unit) 172.8 / 178.2 at 3.54M vs projective 200.9 / 194.1 at n = 128, 201.4 vs
             227.0 at n = 64; standard n = 256 169.2 / 175.4 at 4.94M, n = 128 195.2; the
             authors' unit 179.4.
  Paper:     Table 1c (full AWD-LSTM, 500 epochs): AWD-LSTM 61.2 / 58.8 (24M) vs + DeFINE
             56.5 / 54.2 (20M), val / test perplexity.
  Output:    docs/studies/lm_ptb/{results.md,params_vs_quality.png,valid_curves.png}; runs in
             work/studies/lm_ptb/<arm>/.
"""

from typing import List

from .common import Arm
from .lm import LMStudy, run

ARCH = "define_lstm_small"


def arms(quick: bool) -> List[Arm]:
    hidden, m, ns = (32, 32, (16,)) if quick else (512, 256, (128, 64))
    common = ("--lstm-hidden-dim", str(hidden))
    out = [Arm(f"standard_n{w}", "standard (AWD-LSTM)", ARCH,
               (*common, "--define-map-dim", str(w), "--define-out-dim", str(w), "--define-transform", "none"), w, w)
           for w in (m, ns[0])]
    for n in ns:
        out.append(Arm(f"define_paper_n{n}", "DeFINE (paper)", ARCH,
                       (*common, "--define-map-dim", str(n), "--define-out-dim", str(m), "--define-expand-dim",
                        str(2 * m), "--define-depth", "3", "--define-style", "paper"), m, n))
        if n == ns[0]:
            out.append(Arm(f"define_authors_n{n}", "DeFINE (authors)", ARCH,
                           (*common, "--define-map-dim", str(n), "--define-out-dim", str(m), "--define-expand-dim",
                            str(2 * m), "--define-depth", "3", "--define-style", "authors"), m, n))
        out.append(Arm(f"projective_n{n}", "projective", ARCH,
                       (*common, "--define-map-dim", str(n), "--define-out-dim", str(m), "--define-transform",
                        "projective"), m, n))
    if quick:
        return [out[0], next(a for a in out if a.family == "DeFINE (paper)")]
    return out


def recipe(updates: int, quick: bool) -> List[str]:
    return ["--task", "contiguous_lm", "--criterion", "awd_lm_loss", "--batch-size", "20",
            "--tokens-per-sample", "35" if quick else "70", "--clip-norm", "0.25", "--optimizer", "nt_asgd",
            "--lr-scheduler", "nt_asgd", "--lr", "30", "--nonmono", "5",
            "--distributed-world-size", "1",
            "--no-epoch-checkpoints", "--validate-interval-updates", str(max(updates // 2, 1) if quick else 250)]


STUDY = LMStudy(
    name="lm_ptb",
    title="Study 2: Penn Treebank, perplexity against parameters (AWD-LSTM-style, NT-ASGD lr 30)",
    doc=__doc__,
    dataset="ptb",
    arms=arms,
    recipe=recipe,
    eval_args=("--batch-size", "1"),
    checkpoint="checkpoint_best.pt",
    updates=1500,
    minutes=13,
    second_seed_families=("standard (AWD-LSTM)", "DeFINE (paper)", "projective"),
    header_lines=[
        "Model (every arm): define_lstm_small, 2 LSTM layers (hidden 512, the last n wide), tied output at n; "
        "DeFINE k = 2m, N = 3."
    ],
)

if __name__ == "__main__":
    run(STUDY)

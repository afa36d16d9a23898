"""Write tests/legacy_checkpoints/families/: a small checkpoint of each model family, trained for
a few updates by this commit's code on the test slices, with the log-probabilities this code
gives for a validation batch. tests/test_legacy_families.py loads them with later code and
checks that they build and score as they did: the guard for refactors (issue 32).

  Command:  .venv/bin/python scripts/make_legacy_checkpoints.py [--out DIR] [--families "a b"]
  Time:     about a minute on 2 CPU cores; about 1.5 MB written.
  Data:     tests/data (ptb_style for the language models, wmt_news for translation).

Each family's row below is its whole recipe. The optimizer state is dropped from the saved
files (they are read, never resumed)."""

import argparse
import json
import logging
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
USER_DIR = str(ROOT / "fairseq_define")
logger = logging.getLogger("make_legacy_checkpoints")

LM = ["--task", "contiguous_lm", "--tokens-per-sample", "16", "--optimizer", "adam", "--lr", "1e-3",
      "--batch-size", "4"]
NMT = ["--task", "translation", "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "1500",
       "--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "32", "--decoder-embed-dim", "32",
       "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64", "--encoder-attention-heads", "2",
       "--decoder-attention-heads", "2", "--define-map-dim", "8", "--define-expand-dim", "32"]
# family -> (data kind, fairseq-train arguments)
FAMILIES = {
    "lstm_paper": ("lm", [*LM, "--arch", "define_lstm_tiny", "--define-transform", "define"]),
    "awd_lstm_authors": ("lm", [*LM[:-4], "--arch", "define_lstm_tiny", "--define-transform", "define",
                                "--define-style", "authors", "--criterion", "awd_lm_loss", "--optimizer", "nt_asgd",
                                "--lr-scheduler", "nt_asgd", "--lr", "5", "--clip-norm", "0.25", "--dropout", "0.2",
                                "--dropout-hidden", "0.1", "--weight-drop", "0.2", "--batch-size", "4"]),
    "lstm_projective": ("lm", [*LM, "--arch", "define_lstm_tiny", "--define-transform", "projective"]),
    "txl_adaptive": ("lm", [*LM, "--arch", "define_txl_tiny", "--define-transform", "define", "--define-map-dim", "16",
                            "--define-expand-dim", "32", "--adaptive-cutoff", "200,600",
                            "--criterion", "projected_adaptive_loss"]),
    "transformer_lm": ("lm", ["--task", "language_modeling", "--tokens-per-sample", "16", "--optimizer", "adam",
                               "--lr", "1e-3", "--batch-size", "4", "--arch", "define_transformer_lm_tiny"]),
    "nmt_untied": ("nmt", [*NMT, "--arch", "define_transformer_tiny", "--define-output-layer", "untied"]),
    "nmt_tied_unit": ("nmt", [*NMT, "--arch", "define_transformer_tiny", "--define-output-layer", "tied_unit",
                              "--share-all-embeddings"]),
}


def run(*cmd):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"{cmd[0]} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout


def bin_dir() -> Path:
    return Path(sys.executable).parent


def prepare(kind: str, work: Path) -> Path:
    """Binarized data for a kind of family: the first lines of the test slices."""
    out = work / kind
    if out.is_dir():
        return out
    raw = work / f"{kind}_raw"
    raw.mkdir()
    if kind == "lm":
        for split, n in (("train", 300), ("valid", 40)):
            lines = (DATA / "ptb_style" / f"{split}.txt").read_text(encoding="utf-8").splitlines()[:n]
            (raw / f"{split}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        run(bin_dir() / "fairseq-preprocess", "--only-source", "--trainpref", raw / "train.txt", "--validpref",
            raw / "valid.txt", "--destdir", out, "--workers", "1")
    else:
        for split, n in (("train", 400), ("valid", 20)):
            for lang in ("en", "de"):
                lines = (DATA / "wmt_news" / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()[:n]
                (raw / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
        run(bin_dir() / "fairseq-preprocess", "-s", "en", "-t", "de", "--trainpref", raw / "train", "--validpref",
            raw / "valid", "--destdir", out, "--joined-dictionary", "--nwordssrc", "300", "--workers", "1")
    return out


def reference(ckpt: Path, data: Path) -> dict:
    """The first validation batch, and the log-probabilities this code gives for its targets."""
    from fairseq import checkpoint_utils

    import fairseq_define  # noqa: F401  registers the families

    (model,), _cfg, task = checkpoint_utils.load_model_ensemble_and_task([str(ckpt)], arg_overrides={"data": str(data)})
    task.load_dataset("valid")
    itr = task.get_batch_iterator(dataset=task.dataset("valid"), max_tokens=2000, max_sentences=4, seed=1)
    sample = next(itr.next_epoch_itr(shuffle=False))
    model.eval()
    with torch.no_grad():
        lp = model.get_normalized_probs(model(**sample["net_input"]), log_probs=True)  # [B, T, V]
    target = sample["target"]
    return {"net_input": sample["net_input"], "target": target,
            "target_log_probs": lp.gather(-1, target.unsqueeze(-1)).squeeze(-1), "argmax": lp.argmax(-1)}


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", type=Path, default=ROOT / "tests" / "legacy_checkpoints" / "families",
                   help="folder to write (default tests/legacy_checkpoints/families)")
    p.add_argument("--families", default=" ".join(FAMILIES), help="which families (default: all)")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    wanted = args.families.split()
    unknown = [f for f in wanted if f not in FAMILIES]
    if unknown:
        sys.exit(f"unknown family {', '.join(unknown)}; known: {' '.join(FAMILIES)}")
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    args.out.mkdir(parents=True, exist_ok=True)
    manifest_path = args.out / "families.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in wanted:
            kind, train_args = FAMILIES[name]
            data = prepare(kind, work)
            save = work / f"ck_{name}"
            run(bin_dir() / "fairseq-train", data, "--user-dir", USER_DIR, *train_args, "--max-update", "3",
                "--save-dir", save, "--cpu", "--seed", "1", "--no-epoch-checkpoints", "--disable-validation")
            state = torch.load(save / "checkpoint_last.pt", weights_only=False)
            state["last_optimizer_state"] = None
            torch.save(state, args.out / f"{name}.pt")
            torch.save(reference(args.out / f"{name}.pt", data), args.out / f"{name}.ref.pt")
            dict_name = "dict.txt" if kind == "lm" else "dict.en.txt"
            shutil.copyfile(data / dict_name, args.out / f"{kind}.dict.txt")
            manifest[name] = {"kind": kind, "arch": train_args[train_args.index("--arch") + 1], "commit": commit,
                              "train_args": train_args}
            logger.info("%s: %s", name, args.out / f"{name}.pt")
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

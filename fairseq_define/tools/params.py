"""fairseq-define-params: the paper's parameter distribution for any registered
architecture, built without data (only a vocabulary size), and the paper's tables.

    fairseq-define-params --arch define_transformer_wmt_en_de --vocab-size 32000
    fairseq-define-params --arch transformer_wmt_en_de --vocab-size 32000 --share-all-embeddings
    fairseq-define-params --arch define_transformer_tiny --vocab-size 8000 --baseline transformer
    fairseq-define-params --paper-table 2
    fairseq-define-params --paper-table 6a
    fairseq-define-params --paper-table 3
    fairseq-define-params --paper-table 1a     (also 1c, 6, 7, 8: the LSTM language models)

Any other flag is passed to fairseq's argument parser for the architecture (model
overrides such as ``--define-map-dim 64``). The tables' rows and the paper's numbers are
read from fairseq_define/paper_tables.py, the models' settings from their presets
(models/*.py), and the models are built without data (models/without_data.py).
"""

import argparse
import logging
import sys
from typing import List, Optional, Sequence

import torch
import torch.nn as nn
from fairseq.models import ARCH_MODEL_REGISTRY

import fairseq_define  # noqa: F401  (registers the architectures)

from ..errors import UserError, cli_error
from ..models.lstm_lm import LSTM_WT103
from ..models.transformer_xl import TXL_D384, TXL_WT103
from ..models.without_data import build_arch, is_translation_arch
from ..modules.define.config import DefineConfigError
from ..modules.define.embedding import UNIT_TYPES
from ..modules.define.schedule import build_schedule, default_max_groups
from ..modules.define.unit import DefineUnit
from ..paper_tables import TABLE3_VOCAB, TABLE_1A, TABLE_1C, TABLE_2, TABLE_3, TABLE_6, TABLE_7, TABLE_8, params_split
from ..param_report import format_distribution, parameter_distribution

logger = logging.getLogger("fairseq_define.params")


STYLES = ("paper", "authors")  # the unit structures (--define-style; docs/define_unit.md)


def build_styles(arch: str, vocab: int, extra: Sequence[str] = ()) -> dict:
    """``{style: model}`` for every unit style; None where the style refuses the
    architecture (the paper's ablations have no authors' counterpart)."""
    models = {}
    for style in STYLES:
        try:
            models[style], _ = build_arch(arch, vocab, extra=[*extra, "--define-style", style])
        except DefineConfigError:
            models[style] = None
    return models


def _millions(model, column: str) -> Optional[float]:
    return None if model is None else parameter_distribution(model)[column] / 1e6


def _or_dash(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.2f}"


# The sizes that make a baseline "the same model" without DeFINE.
SIZE_KEYS = [
    "encoder_embed_dim", "encoder_ffn_embed_dim", "encoder_layers", "encoder_attention_heads",
    "decoder_embed_dim", "decoder_ffn_embed_dim", "decoder_layers", "decoder_attention_heads",
]


def same_size_flags(args) -> List[str]:
    flags = []
    for key in SIZE_KEYS:
        if hasattr(args, key):
            flags += [f"--{key.replace('_', '-')}", str(getattr(args, key))]
    if getattr(args, "share_all_embeddings", False):
        flags.append("--share-all-embeddings")
    return flags


def define_units(model) -> List[nn.Module]:
    return [m for m in model.modules() if isinstance(m, UNIT_TYPES)]  # modules() yields each once


def report_arch(arch, src_vocab, tgt_vocab=None, extra=(), baseline=None) -> dict:
    if baseline and baseline in ARCH_MODEL_REGISTRY and is_translation_arch(baseline) != is_translation_arch(arch):
        kind = {True: "a translation model", False: "a language model"}
        raise DefineConfigError(
            f"--baseline {baseline} is {kind[is_translation_arch(baseline)]} but --arch {arch} is "
            f"{kind[is_translation_arch(arch)]}: compare with a baseline of the same kind (e.g. "
            f"{'transformer' if is_translation_arch(arch) else 'transformer_lm'})"
        )
    if baseline and baseline not in ARCH_MODEL_REGISTRY:
        build_arch(baseline, src_vocab)  # its unknown-architecture error, before the work
    model, args = build_arch(arch, src_vocab, tgt_vocab, extra)
    counts = parameter_distribution(model)
    print(format_distribution(counts, arch))
    for unit in define_units(model):
        n = sum(p.numel() for p in unit.parameters())
        print(f"  unit {n / 1e6:.3f}M: {unit.schedule.describe()}")
    if baseline:
        base, _ = build_arch(baseline, src_vocab, tgt_vocab, same_size_flags(args))
        base_counts = parameter_distribution(base)
        print(format_distribution(base_counts, f"{baseline} (same sizes)"))
        print(f"  ratio {arch} / {baseline} = {counts['total'] / base_counts['total']:.3f}")
    return counts


def unit_parameters(**kwargs) -> int:
    """Parameters of one DeFINE unit built from ``build_schedule`` settings; ``bias`` and
    ``norm`` select the layer type (the paper's F_G, eq. 1, has neither)."""
    bias = kwargs.pop("bias", True)
    norm = kwargs.pop("norm", "layer")
    with torch.device("meta"):
        unit = DefineUnit(build_schedule(**kwargs), norm=norm, bias=bias)
    return sum(p.numel() for p in unit.parameters()), unit.schedule


def _unit_settings(row) -> dict:
    """``build_schedule`` settings of a row's unit (n = m), from its architecture's settings."""
    s = row.settings
    return dict(map_dim=s["define_map_dim"], expand_dim=s["define_expand_dim"], depth=s["define_depth"],
                out_dim=s["define_map_dim"], transform=s["define_transform"], max_groups=s.get("define_max_groups"))


def _reproduced(names: Sequence[str]) -> str:
    return ", ".join(names) if names else "no row"


def table_6a() -> None:
    _, context, io, _ = params_split(TABLE_6.rows[0])  # every row's: Table 1a's at n = m = 384
    grouped = {
        row.name: row.settings["define_max_groups"] for row in TABLE_6.rows if "define_max_groups" in row.settings
    }
    print(
        f"{TABLE_6.title}. Layer stacks counted as in the paper: F_G weights (eq. 1) and the Reduce "
        f"[k; n] -> m, no bias or normalization; groups in every layer and in Reduce: "
        f"{', '.join(f'{name} {g}' for name, g in grouped.items())}, the others the default g_max. "
        f"Paper column = row total - {context + io:.2f}M (context {context:.2f}M + adaptive input-output {io:.2f}M)."
    )
    print(f"{'layer':<20} {'ours':>8} {'paper':>8}  schedule")
    same, differ = [], []
    for row in TABLE_6.rows:
        unit = _unit_settings(row)
        count, sched = unit_parameters(**unit, bias=False, norm="none")
        ours, paper = round(count / 1e6, 2), params_split(row)[0]
        (same if ours == paper else differ).append(row.name)
        print(f"{row.name:<20} {ours:>7.2f}M {paper:>7.2f}M  {sched.describe()}")
    n = TABLE_6.rows[0].settings["define_map_dim"]
    print(
        f"{_reproduced(same)} reproduce the paper; {_reproduced(differ)} depend on g_max, which the paper does "
        f"not state (default here: {default_max_groups(n, n)} at n = m = {n}, define_schedule.default_max_groups)."
    )


def table_3(vocab: int) -> None:
    """Table 3 as the paper built it (separate vocabularies, the untied d-wide output layer),
    the other output forms beside it, then fairseq's usual shared vocabulary."""
    base_row, define_row = TABLE_3.rows
    paper_base, paper_define = base_row.paper["params"], define_row.paper["params"]
    print(
        f"Table 3 (WMT14 EN-DE) as the paper built it: separate source and target vocabularies of "
        f"{TABLE3_VOCAB:,} tokens (the size at which the Transformer, with its own untied output "
        f"layer, has the paper's {paper_base:.0f}M), one DeFINE map and unit per side, the output "
        f"layer untied and d_model wide. Paper: {base_row.label} {paper_base:.0f}M, "
        f"{define_row.label} {paper_define:.0f}M."
    )
    base = report_arch(base_row.arch, TABLE3_VOCAB, TABLE3_VOCAB)
    for style in STYLES:
        ours = report_arch(define_row.arch, TABLE3_VOCAB, TABLE3_VOCAB, ["--define-style", style])
        print(f"  without the units (the paper's {paper_define:.0f}M, whose DeFINE column is not "
              f"given): {(ours['total'] - ours['define']) / 1e6:.2f}M; ratio {define_row.arch} "
              f"({style} unit) / {base_row.arch} = {ours['total'] / base['total']:.3f}")
    print("Other output layers (--define-output-layer), paper's unit:")
    for form in ("tied_map", "tied_unit"):
        ours = report_arch(define_row.arch, TABLE3_VOCAB, TABLE3_VOCAB, ["--define-output-layer", form])
        print(f"  ratio ({form}) / {base_row.arch} = {ours['total'] / base['total']:.3f}")
    print(f"fairseq's usual WMT setup: one shared {vocab}-token vocabulary (--share-all-embeddings), "
          "paper's unit:")
    shared = report_arch(base_row.arch, vocab, extra=["--share-all-embeddings"])
    for form in ("untied", "tied_map"):
        ours = report_arch(define_row.arch, vocab, extra=["--share-all-embeddings", "--define-output-layer", form])
        print(f"  ratio ({form}) / {base_row.arch} = {ours['total'] / shared['total']:.3f}")


# Table 2 (WikiText-103, Transformer-XL) as fairseq-define-params lists it: standard, then
# projective, then DeFINE rows, with a projective n = d = 384 row that the paper leaves out
# (its counts are the standard n=384 row's).
def _txl_rows(kind: str) -> list:
    return [(row.name, row.arch, row) for row in TABLE_2.rows if row.id.startswith(kind)]


TABLE2_ROWS = (_txl_rows("standard")
               + [("Projective n=384", "define_txl_wt103_projective_n384", TABLE_2.row("standard_d384"))]
               + _txl_rows("projective") + _txl_rows("define"))
WT103_VOCAB = 267735


def _columns_reproduced(rows) -> str:
    """Which of the context-model and input-output columns equal the paper's (2 decimals) in
    every row of ``rows``: (ours, paper) pairs of each."""
    same = [name for name, pairs in rows.items() if all(p is None or round(o, 2) == p for o, p in pairs)]
    return (
        f"The {' and '.join(same) or 'no'} column{'s' if len(same) != 1 else ''} "
        f"reproduce{'' if len(same) != 1 else 's'} the paper"
    )


def table_2() -> None:
    print(
        f"{TABLE_2.title}: vocabulary {WT103_VOCAB:,}, adaptive cutoffs {TXL_WT103['adaptive_cutoff']}, "
        f"div_val {TXL_WT103['div_val']:g}, per-band projections n -> d tied between input and output. "
        "Columns: ours (paper)."
    )
    print(f"{'row':<18} {'DeFINE paper-style':>19} {'authors':>8} {'context model':>17} {'input-output':>17}")
    columns = {"context-model": [], "input-output": []}
    for name, arch, row in TABLE2_ROWS:
        p_define, p_context, p_io, _ = params_split(row)
        models = build_styles(arch, WT103_VOCAB)
        c = {k: v / 1e6 for k, v in parameter_distribution(models["paper"]).items()}
        define = f"{c['define']:.2f} ({p_define:.2f})" if p_define else "-"
        authors = _or_dash(_millions(models["authors"], "define")) if p_define else "-"
        print(f"{name:<18} {define:>19} {authors:>8} {c['context']:>7.2f} ({p_context:.2f}) "
              f"{c['input_output']:>8.2f} ({p_io:.2f})")
        columns["context-model"].append((c["context"], p_context))
        columns["input-output"].append((c["input_output"], p_io))
    define_row = TABLE_2.row("define_n128")
    for style, model in build_styles(define_row.arch, WT103_VOCAB).items():
        for unit in define_units(model):
            print(f"DeFINE unit (every DeFINE row; it reads the 384-dim projection), {style} style: "
                  f"{unit.schedule.describe()}")
    N, k, m = (
        define_row.settings["define_depth"],
        define_row.settings["define_expand_dim"],
        TXL_D384["decoder_embed_dim"],
    )
    paper, reduce = define_row.paper["define"], (k + m) * m / 1e6  # Reduce [k; m] -> m, weights alone
    print(
        f"{_columns_reproduced(columns)}. The paper's {paper:.2f}M DeFINE unit (N={N}, k={k}, m={m}) cannot be "
        f"rebuilt: its Reduce alone, [k; {m}] -> {m}, has {reduce:.2f}M parameters, which leaves {paper - reduce:.1f}M "
        f"for {N} Expand layers reaching width {k}."
    )


# LSTM language models (Tables 1a, 6, 7, 8): (row, arch, paper DeFINE, context, input-output,
# total); None where the paper gives no such number.
def _lstm_rows(table) -> list:
    return [(row.name, row.arch, *params_split(row)) for row in table.rows]


TABLE1A_ROWS = _lstm_rows(TABLE_1A)
LSTM_TABLES = {
    t.id: (t.title, TABLE1A_ROWS if t is TABLE_1A else _lstm_rows(t)) for t in (TABLE_1A, TABLE_6, TABLE_7, TABLE_8)
}


def _ours_paper(ours: float, paper: Optional[float]) -> str:
    return f"{ours:.2f} ({'-' if paper is None else f'{paper:.2f}'})"


def lstm_table(key: str, vocab: int = WT103_VOCAB) -> None:
    title, rows = LSTM_TABLES[key]
    lstm = LSTM_WT103
    print(
        f"{title}: {lstm['lstm_layers']} LSTM layers of {lstm['lstm_hidden_dim']} (the last m wide), vocabulary "
        f"{vocab:,}, adaptive input/softmax tied (cutoffs {lstm['adaptive_cutoff']}, factor {lstm['div_val']:g}, "
        "no output bias) but R1 (a standard table with an output bias). Columns: ours (paper), millions."
    )
    print(f"{'row':<24} {'DeFINE paper-style':>18} {'authors':>8} {'context model':>15} {'input-output':>15} "
          f"{'total paper-style':>17} {'authors':>8}")
    columns = {"context-model": [], "input-output": []}
    for name, arch, p_define, p_context, p_io, p_total in rows:
        models = build_styles(arch, vocab)
        c = {k: v / 1e6 for k, v in parameter_distribution(models["paper"]).items()}
        print(
            f"{name:<24} {_ours_paper(c['define'], p_define):>18} "
            f"{_or_dash(_millions(models['authors'], 'define')):>8} "
            f"{_ours_paper(c['context'], p_context):>15} {_ours_paper(c['input_output'], p_io):>15} "
            f"{_ours_paper(c['total'], p_total):>17} {_or_dash(_millions(models['authors'], 'total')):>8}"
        )
        columns["context-model"].append((c["context"], p_context))
        columns["input-output"].append((c["input_output"], p_io))
        for style, model in models.items():
            for unit in define_units(model) if model is not None else ():
                print(f"{'':<24} {style} unit: {unit.schedule.describe()}")
    r4_define = TABLE_1A.row("r4_define_n384").paper["define"]
    t6_define = params_split(TABLE_6.row("define"))[0]
    print(
        f"{_columns_reproduced(columns)}. Its DeFINE column "
        "cannot be rebuilt exactly (g_max is not stated, and Tables 1a and 6 disagree on the "
        f"same N=7 unit: {r4_define:.2f}M vs {t6_define:.2f}M); the authors' released unit (--define-style authors) "
        "comes closest. Both units are printed with the schedules that give them; '-': the "
        "authors' code has no such unit."
    )


PTB_VOCAB = 10000


def table_1c(vocab: int = PTB_VOCAB) -> None:
    print(
        f"Table 1c (AWD-LSTM on PTB, vocabulary {vocab:,}): 3 LSTM layers of 1150, the last as "
        "wide as the tied output table. Columns: ours (paper), millions."
    )
    for row in TABLE_1C.rows:
        models = build_styles(row.arch, vocab)
        styles = STYLES if define_units(models["paper"]) else ("paper",)  # the baseline has no unit: one row
        for style in styles:
            counts = parameter_distribution(models[style])
            label = f"{row.name} (authors)" if style == "authors" else row.name
            print(f"{label:<28} {format_distribution(counts)}  (paper: {row.paper['params']:.0f}M)")
            for unit in define_units(models[style]):
                print(f"{'':<28} {style} unit: {unit.schedule.describe()}")
    rest = (counts["context"] + counts["input_output"]) / 1e6
    define_row = TABLE_1C.rows[-1]
    paper, unit = define_row.paper["params"], define_row.settings
    n, k, N, m = (unit[f"define_{key}"] for key in ("map_dim", "expand_dim", "depth", "out_dim"))
    print(
        "The baseline matches AWD-LSTM's 24.2M. With DeFINE "
        f"(n={n}, k={k}, N={N}, m={m}) the last LSTM layer is {n} wide and tied to the {n}-dim map: {rest:.2f}M "
        f"without the unit, so the paper's {paper:.0f}M leaves {paper - rest:.2f}M for the unit, less than any "
        f"N={N} unit reaching k={k} (see Table 1a)."
    )


def architectures_markdown() -> str:
    """docs/architectures.md: every architecture this plugin registers, by model, with the
    description it was registered with (the one home of what a named architecture is)."""
    from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_INV_REGISTRY, MODEL_REGISTRY

    lines = ["# Named architectures", "",
             "Every `--arch` this plugin registers, with the description it is registered with. Generated by "
             "`fairseq-define-params --list-archs > docs/architectures.md` (tests/test_readme.py checks it); "
             "every `--define-*` setting and fairseq's own flags override a row's values.", ""]
    for model in sorted(m for m, cls in MODEL_REGISTRY.items() if cls.__module__.startswith("fairseq_define")):
        lines += [f"## `{model}`", "", "| `--arch` | what |", "|---|---|"]
        for arch in sorted(ARCH_MODEL_INV_REGISTRY.get(model, [])):
            doc = " ".join((ARCH_CONFIG_REGISTRY[arch].__doc__ or "").split()).replace("|", "\\|")
            doc = doc or "the model at its defaults: every size from the command line"
            lines.append(f"| `{arch}` | {doc} |")
        lines.append("")
    return "\n".join(lines)


def cli_main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fairseq-define-params",
        description="Print the paper's parameter distribution (DeFINE / context model / "
        "input-output / total) for a registered architecture, without data.",
        epilog="Other flags are passed to the architecture (e.g. --define-map-dim 64).",
    )
    parser.add_argument("--arch", help="a registered fairseq architecture")
    parser.add_argument("--vocab-size", type=int, default=32000, help="(source) vocabulary size, specials included")
    parser.add_argument(
        "--tgt-vocab-size", type=int, default=None, help="target vocabulary size (default: joined with the source)"
    )
    parser.add_argument(
        "--baseline",
        metavar="ARCH",
        help="also build ARCH (e.g. transformer) with the same layer sizes and print the ratio",
    )
    parser.add_argument("--paper-table", choices=["1a", "1c", "2", "3", "6", "6a", "7", "8"],
                        help="print a table of the paper (1a, 1c, 6, 7, 8: LSTM language models; "
                        "2: Transformer-XL; 3: NMT; 6a: Table 6's layer stacks alone)")
    parser.add_argument("--list-archs", action="store_true",
                        help="print every architecture this plugin registers with its description (markdown: "
                        "docs/architectures.md) and exit")
    args, extra = parser.parse_known_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    if args.list_archs:
        sys.stdout.write(architectures_markdown())
        return 0
    if not args.arch and not args.paper_table:
        parser.error("give --arch ARCH, --paper-table TABLE or --list-archs")
    if args.paper_table:
        ignored = [f for f, v in (("--arch", args.arch), ("--baseline", args.baseline),
                                  ("--tgt-vocab-size", args.tgt_vocab_size)) if v] + list(extra)
        if ignored:
            return cli_error(
                parser.prog,
                f"--paper-table {args.paper_table} prints the paper's fixed settings and "
                f"ignores {' '.join(ignored)}: drop them, or run --arch without --paper-table",
            )
    try:
        if args.paper_table == "2":
            table_2()
        elif args.paper_table == "6a":
            table_6a()
        elif args.paper_table == "3":
            table_3(args.vocab_size)
        elif args.paper_table == "1c":
            table_1c()
        elif args.paper_table in LSTM_TABLES:
            lstm_table(args.paper_table)
        if args.arch:
            report_arch(args.arch, args.vocab_size, args.tgt_vocab_size, extra, args.baseline)
    except UserError as e:
        return cli_error(parser.prog, e)
    return 0


if __name__ == "__main__":
    sys.exit(cli_main())

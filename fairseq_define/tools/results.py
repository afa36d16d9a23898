"""fairseq-define-results: the paper's tables beside our runs, training curves, and the
correlation maps of the token embeddings (Mehta et al., ICLR 2020).

    fairseq-define-results rows --table 1a [--small]
    fairseq-define-results paper --table 6
    fairseq-define-results record --table 1a --row r3_define_n256 --run-dir work/1a/r3_define_n256 \\
        --mode small --metric valid_ppl=123.4 --metric test_ppl=118.9
    fairseq-define-results table --table 1a --workdir work/1a [--output work/1a/results.md]
    fairseq-define-results curves --output curves.png [--metric valid_ppl] define=work/a/train.log ...
    fairseq-define-results correlations --path checkpoint_best.pt --output corr.png [--max-tokens-vocab V]

``rows`` lists a table's rows for shell recipes; ``paper`` prints the paper's numbers of a
table (the recipes' --help shows them); ``record`` writes a run's result.json;
``table`` prints our numbers beside the paper's as markdown; ``curves`` plots validation
metrics against updates (the paper's Figure 6); ``correlations`` draws the correlation maps
of the map, each Expand layer and the final embedding (appendix B, Figures 4 and 7-11).
"""

import argparse
import logging
import os
import sys
from typing import Optional, Sequence

from ..errors import UserError, cli_error
from ..output_files import check_new_output, write_text
from ..paper_tables import RESULTS_PROG as PROG
from ..paper_tables import TABLES, Row, find_table
from .correlation_maps import correlation_maps, plot_correlations, token_embedding
from .curves import parse_run, plot_curves
from .result_records import MODES, load_model, record
from .results_table import markdown_table, paper_numbers

logger = logging.getLogger("fairseq_define.results")


def row_line(row: Row, small: bool) -> str:
    """row_id, arch, extra training args (space-separated), source or -, compressed 1/0."""
    return "\t".join([row.id, row.train_arch(small), " ".join(row.train_args(small)), row.source or "-",
                      "1" if row.compressed else "0"])


def cmd_rows(args) -> None:
    """One tab-separated line per row: row_id, arch, extra args, source, compressed."""
    table = find_table(args.table)
    for row in table.rows:
        print(row_line(row, args.small))


def cmd_paper(args) -> None:
    print(paper_numbers(args.table), end="")


def cmd_record(args) -> None:
    path = record(args.table, args.row, args.run_dir, args.mode, args.arch, args.metric or ())
    print(f"wrote {path}")


def cmd_table(args) -> None:
    if args.output:
        check_new_output(args.output, args.overwrite)
    text = markdown_table(args.table, args.workdir)
    if args.output:
        write_text(args.output, text, overwrite=args.overwrite)
    print(text, end="")


def cmd_curves(args) -> None:
    check_new_output(args.output, args.overwrite)
    curves = plot_curves([parse_run(r) for r in args.runs], args.output, args.metric, args.title, args.overwrite)
    for label, points in curves.items():
        print(f"{label}: {len(points)} validations, {args.metric} {points[-1][1]:.2f} at {points[-1][0]} updates")
    print(f"wrote {args.output}")


def cmd_correlations(args) -> None:
    check_new_output(args.output, args.overwrite)  # before the work
    model = load_model(args.path, args.data)
    embed, vocab = token_embedding(model)
    maps = correlation_maps(embed, vocab, args.max_tokens_vocab)
    count = vocab if args.max_tokens_vocab is None else min(args.max_tokens_vocab, vocab)
    name = os.path.join(os.path.basename(os.path.dirname(os.path.abspath(args.path))), os.path.basename(args.path))
    title = f"{name}: correlation maps over {count} tokens"
    plot_correlations(maps, args.output, title, args.overwrite)
    print(f"{args.path}: {type(embed).__name__}, {count} of {vocab} vocabulary entries")
    for cm in maps:
        print(f"{cm.title}: mean |off-diagonal correlation| {cm.mean_off_diagonal:.4f}")
    print(f"wrote {args.output} ({len(maps)} panels)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    tables = ", ".join(TABLES)

    p = sub.add_parser("rows", help="list a paper table's rows for shell recipes",
                       description="One line per row of a paper table, tab-separated: row_id, arch, "
                       "extra fairseq-train args (space-separated, may be empty), source row (Table 5) "
                       "or -, compressed (1/0).")
    p.add_argument("--table", required=True, help=f"paper table: {tables}")
    p.add_argument("--small", action="store_true", help="the small CPU runs' arch and args")
    p.set_defaults(func=cmd_rows)

    p = sub.add_parser("paper", help="the paper's numbers of a table",
                       description="One line per row of a paper table: its label and the numbers the paper "
                       "reports (fairseq_define/paper_tables.py).")
    p.add_argument("--table", required=True, help=f"paper table: {tables}")
    p.set_defaults(func=cmd_paper)

    p = sub.add_parser("record", help="write a run's result.json",
                       description="Write RUN_DIR/result.json (atomically): the row, the mode, the "
                       "arch, the parameter distribution and the last num_updates from "
                       "RUN_DIR/train.log (null when absent), and the given metrics.")
    p.add_argument("--table", required=True, help=f"paper table: {tables}")
    p.add_argument("--row", required=True, help="row id (see the rows command)")
    p.add_argument("--run-dir", required=True, help="the run's directory (with its train.log)")
    p.add_argument("--mode", choices=MODES, default="small", help="small (toy-scale CPU run, default) or full")
    p.add_argument("--arch", help="architecture trained (default: the row's, for the mode)")
    p.add_argument("--metric", action="append", metavar="NAME=VALUE",
                   help="a measured number, e.g. valid_ppl=123.4 (repeat for each)")
    p.set_defaults(func=cmd_record)

    p = sub.add_parser("table", help="our numbers beside the paper's, as markdown",
                       description="Print a markdown table: for every row, ours (WORKDIR/<row>/result.json) "
                       "beside the paper's numbers; rows without a result show 'not run'.")
    p.add_argument("--table", required=True, help=f"paper table: {tables}")
    p.add_argument("--workdir", default=".", help="directory holding one run directory per row (default: .)")
    p.add_argument("--output", help="also write the markdown to this file")
    p.add_argument("--overwrite", action="store_true", help="replace --output if it exists (default: refuse)")
    p.set_defaults(func=cmd_table)

    p = sub.add_parser("curves", help="validation metric vs updates (paper Figure 6)",
                       description="Plot a validation metric against training updates, one line per "
                       "run, from fairseq-train logs (json or simple format), like the paper's "
                       "Figure 6 (validation perplexity over training).")
    p.add_argument("--output", required=True, help="figure file (.png, .pdf, .svg)")
    p.add_argument("--metric", default="valid_ppl", help="valid_ppl (default), valid_loss, valid_bleu, ...")
    p.add_argument("--title", help="figure title")
    p.add_argument("--overwrite", action="store_true", help="replace --output if it exists (default: refuse)")
    p.add_argument("runs", nargs="+", metavar="LABEL=TRAIN_LOG", help="a run's label and training log")
    p.set_defaults(func=cmd_curves)

    p = sub.add_parser("correlations", help="correlation maps of the embeddings (appendix B)",
                       description="The correlation maps of the paper's appendix B (Figures 4, 7-11): "
                       "M = E^T E, normalised to correlations, for the map e_i, each Expand layer of "
                       "the DeFINE unit, and the final embedding e_o, over the vocabulary.")
    p.add_argument("--path", required=True, help="trained checkpoint")
    p.add_argument("--output", required=True, help="figure file (.png, .pdf, .svg)")
    p.add_argument(
        "--max-tokens-vocab", type=int, metavar="V", help="use the first V vocabulary entries (default: all)"
    )
    p.add_argument(
        "--data", help="data directory with the dictionaries (default: the one the checkpoint was trained on)"
    )
    p.add_argument("--overwrite", action="store_true", help="replace --output if it exists (default: refuse)")
    p.set_defaults(func=cmd_correlations)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    # the commands print their numbers; this tool's info log is for library callers
    logger.setLevel(logging.WARNING)
    try:
        args.func(args)
    except UserError as e:
        return cli_error(PROG, e)
    return 0


if __name__ == "__main__":
    sys.exit(main())

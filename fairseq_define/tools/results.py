"""fairseq-define-results: the paper's tables beside our runs, training curves, and the
correlation maps of the token embeddings (Mehta et al., ICLR 2020).

    fairseq-define-results rows --table 1a [--small]
    fairseq-define-results record --table 1a --row r3_define_n256 --run-dir work/1a/r3_define_n256 \\
        --mode small --metric valid_ppl=123.4 --metric test_ppl=118.9
    fairseq-define-results table --table 1a --workdir work/1a [--output work/1a/results.md]
    fairseq-define-results curves --output curves.png [--metric valid_ppl] define=work/a/train.log ...
    fairseq-define-results correlations --path checkpoint_best.pt --output corr.png [--max-tokens-vocab V]

``rows`` lists a table's rows for shell recipes; ``record`` writes a run's result.json;
``table`` prints our numbers beside the paper's as markdown; ``curves`` plots validation
metrics against updates (the paper's Figure 6); ``correlations`` draws the correlation maps
of the map, each Expand layer and the final embedding (appendix B, Figures 4 and 7-11).
"""

import argparse
import json
import logging
import math
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import UserError, cli_error
from ..output_files import atomic_write, write_text
from .paper_tables import TABLES, Row, Table

logger = logging.getLogger("fairseq_define.results")

PROG = "fairseq-define-results"
MODES = ("small", "full")
RESULT_FILE = "result.json"
TRAIN_LOG = "train.log"
SMALL_NOTE = (
    "Small runs are pipeline checks at toy scale (small data, small models, few updates): "
    "their numbers are not comparable to the paper's."
)

# Figure geometry (pixels = inches x DPI; no tight bounding box, so the size is exact).
DPI = 100
CURVES_INCHES = (6.4, 4.8)
PANEL_INCHES = 3  # width of one correlation map
COLORBAR_INCHES = 1  # extra width for the shared colourbar
CORRELATION_HEIGHT_INCHES = 3.5


# ---------------------------------------------------------------------------- paper tables


def find_table(table_id: str) -> Table:
    if table_id not in TABLES:
        raise UserError(
            f"unknown paper table {table_id!r}; use one of {', '.join(TABLES)} "
            "(e.g. --table 1a)"
        )
    return TABLES[table_id]


def find_row(table: Table, row_id: str) -> Row:
    for row in table.rows:
        if row.id == row_id:
            return row
    raise UserError(
        f"table {table.id} has no row {row_id!r}; use one of {', '.join(r.id for r in table.rows)} "
        f"({PROG} rows --table {table.id} lists them)"
    )


def row_arch(row: Row, small: bool) -> str:
    return (row.small_arch or row.arch) if small else row.arch


def row_line(row: Row, small: bool) -> str:
    """row_id, arch, extra training args (space-separated), source or -, compressed 1/0."""
    args = row.small_args if small else row.args
    return "\t".join([row.id, row_arch(row, small), " ".join(args), row.source or "-", "1" if row.compressed else "0"])


# ---------------------------------------------------------------------------- training logs

_PARAMS = re.compile(
    r"parameters \(paper's distribution\): (?:.*?: )?DeFINE ([0-9.]+)M \| context model ([0-9.]+)M "
    r"\| input-output ([0-9.]+)M \| total ([0-9.]+)M"
)
# num_updates 200 (simple), num_updates=200 (simple train_inner), "num_updates": "200" (json)
_UPDATES = re.compile(r"num_updates\"?(?:\s*:\s*\"?|=|\s+)(\d+)")
_JSON_STATS = re.compile(r"\|\s*([\w.-]+)\s*\|\s*(\{.*\})\s*$")
_SIMPLE_VALID = re.compile(r"valid on '([^']+)' subset\s*\|(.*)$")


def _read_lines(path: str) -> List[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()
    except FileNotFoundError:
        raise UserError(f"no such training log: {path}; give the file fairseq-train's output went to") from None
    except IsADirectoryError:
        raise UserError(f"{path} is a directory; give the training log file (e.g. {os.path.join(path, TRAIN_LOG)})") from None


def parse_params(lines: Sequence[str]) -> Optional[Dict[str, float]]:
    """The last "parameters (paper's distribution)" line, in millions, or None."""
    found = None
    for line in lines:
        m = _PARAMS.search(line)
        if m:
            found = dict(zip(("define", "context", "input_output", "total"), map(float, m.groups())))
    return found


def checkpoint_params(path: str) -> Dict[str, float]:
    """The paper's distribution counted on a checkpoint's model, in millions: for fairseq's
    own baselines, which log no distribution line (fairseq's "num. model params" would count
    the encoder layers' fast-path weight copies too)."""
    from ..param_report import parameter_distribution

    return {k: round(v / 1e6, 2) for k, v in parameter_distribution(load_model(path)).items()}


def parse_updates(lines: Sequence[str]) -> Optional[int]:
    """The last num_updates in a fairseq-train log (json or simple format), or None."""
    last = None
    for line in lines:
        for m in _UPDATES.finditer(line):
            last = int(m.group(1))
    return last


def _number(value):
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _validation_record(line: str):
    """(subset, {key: float}) for a validation line of either format, else None."""
    m = _SIMPLE_VALID.search(line)
    if m:
        subset, record = m.group(1), {}
        for item in m.group(2).split("|"):
            parts = item.strip().rsplit(None, 1)
            if len(parts) == 2 and _number(parts[1]) is not None:
                record[f"{subset}_{parts[0]}"] = _number(parts[1])
        return subset, record
    m = _JSON_STATS.search(line)
    if not m or m.group(1) in ("train", "train_inner"):
        return None
    subset = m.group(1)
    try:
        stats = json.loads(m.group(2))
    except ValueError:
        return None
    if not isinstance(stats, dict) or not any(str(k).startswith(subset + "_") for k in stats):
        return None
    return subset, {k: _number(v) for k, v in stats.items() if _number(v) is not None}


def parse_validation(lines: Sequence[str]) -> List[Dict[str, float]]:
    """Every validation record of a fairseq-train log, in order, keys prefixed by the subset
    as fairseq's json format writes them (valid_loss, valid_ppl, valid_bleu,
    valid_num_updates ...), values as floats, and "_subset". Both formats:

    json:   ``| valid | {"epoch": 1, "valid_loss": "5.12", "valid_ppl": "34.7", "valid_num_updates": "200"}``
    simple: ``| valid | epoch 001 | valid on 'valid' subset | loss 5.12 | ppl 34.7 | num_updates 200``
    """
    records = []
    last_updates = None  # for a record without its own num_updates
    for line in lines:
        parsed = _validation_record(line)
        if parsed is None:
            for m in _UPDATES.finditer(line):
                last_updates = int(m.group(1))
            continue
        subset, record = parsed
        key = f"{subset}_num_updates"
        if key not in record and last_updates is not None:
            record[key] = float(last_updates)
        record["_subset"] = subset
        records.append(record)
    return records


def validation_curve(path: str, metric: str) -> List[Tuple[int, float]]:
    """(updates, value) of ``metric`` (e.g. valid_ppl) over a log's validation lines,
    sorted by updates (a resumed run's repeated update counts keep their last value)."""
    records = parse_validation(_read_lines(path))
    if not records:
        raise UserError(
            f"{path} has no validation lines (\"valid on 'valid' subset\" or \"| valid | {{...}}\"): "
            "give the log of a fairseq-train run with validation (no --disable-validation), "
            "all of its output (stdout, or --log-file)"
        )
    points = {}
    for record in records:
        if metric in record:
            updates = record.get(f"{record['_subset']}_num_updates")
            if updates is not None:
                points[int(updates)] = record[metric]
    if not points:
        available = sorted({k for r in records for k in r if not k.startswith("_") and not k.endswith("num_updates")})
        raise UserError(
            f"{path} has validation lines but no {metric} in them; use --metric with one of "
            f"{', '.join(available)}"
        )
    return sorted(points.items())


# ---------------------------------------------------------------------------- result.json


def parse_metric(text: str) -> Tuple[str, float]:
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise UserError(f"--metric {text!r}: give NAME=VALUE, e.g. --metric valid_ppl=123.4")
    number = _number(value.strip())
    if number is None:
        raise UserError(
            f"--metric {text!r}: {value.strip()!r} is not a finite number; give NAME=VALUE with a "
            f"numeric VALUE, e.g. --metric {name}=123.4"
        )
    return name, number


def build_result(table_id: str, row_id: str, run_dir: str, mode: str = "small", arch: Optional[str] = None,
                 metrics: Sequence[str] = ()) -> dict:
    """The contents of RUN_DIR/result.json; ``metrics`` are NAME=VALUE strings."""
    table = find_table(table_id)
    row = find_row(table, row_id)
    if mode not in MODES:
        raise UserError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    if not os.path.isdir(run_dir):
        raise UserError(f"no run directory {run_dir}; give the directory the run wrote train.log to")
    if not metrics:
        raise UserError("no metrics; give at least one --metric NAME=VALUE, e.g. --metric valid_ppl=123.4")
    values = {}
    for text in metrics:
        name, value = parse_metric(text)
        if name in values:
            raise UserError(f"--metric {name} given twice; give each metric once")
        values[name] = value
    unknown = [n for n in values if n not in table.metrics]
    if unknown:
        logger.warning("table %s shows only %s; also recorded: %s", table.id, ", ".join(table.metrics), ", ".join(unknown))
    log = os.path.join(run_dir, TRAIN_LOG)
    lines = _read_lines(log) if os.path.isfile(log) else []
    params = parse_params(lines)
    checkpoint = os.path.join(run_dir, "checkpoint_last.pt")
    if params is None and os.path.isfile(checkpoint):
        params = checkpoint_params(checkpoint)
    return {
        "table": table.id,
        "row": row.id,
        "label": row.label,
        "mode": mode,
        "arch": arch or row_arch(row, mode == "small"),
        "params": params,
        "updates": parse_updates(lines),
        "metrics": values,
    }


def record(table_id, row_id, run_dir, mode="small", arch=None, metrics=()) -> str:
    """Write RUN_DIR/result.json atomically; returns its path."""
    result = build_result(table_id, row_id, run_dir, mode, arch, metrics)
    path = os.path.join(run_dir, RESULT_FILE)
    write_text(path, json.dumps(result, indent=2, sort_keys=False) + "\n")
    return path


def load_result(path: str, table: Table, row: Row) -> Optional[dict]:
    """A row's result.json, or None when the row has not been run."""
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            result = json.load(f)
    except ValueError as e:
        raise UserError(f"{path} is not valid JSON ({e}); record the run again with {PROG} record") from None
    if not isinstance(result, dict) or not isinstance(result.get("metrics"), dict):
        raise UserError(f"{path} is not a result file (no metrics); record the run again with {PROG} record")
    if (result.get("table"), result.get("row")) != (table.id, row.id):
        raise UserError(
            f"{path} records table {result.get('table')} row {result.get('row')}, not table {table.id} "
            f"row {row.id}; record this row's run into its own directory (--workdir/{row.id})"
        )
    return result


# ---------------------------------------------------------------------------- markdown table

_HEADERS = {
    "params": "params (M)",
    "valid_ppl": "valid ppl",
    "test_ppl": "test ppl",
    "bleu_newstest2014": "BLEU newstest2014",
    "bleu_newstest2017": "BLEU newstest2017",
    "table_mb": "table (MB)",
}


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def _ours(result: dict, metric: str):
    value = result["metrics"].get(metric)
    if value is None and metric == "params":
        value = (result.get("params") or {}).get("total")
    return value


def markdown_table(table_id: str, workdir: str = ".") -> str:
    """Our numbers (WORKDIR/<row>/result.json) beside the paper's, as a markdown table."""
    table = find_table(table_id)
    header = ["row"]
    for metric in table.metrics:
        name = _HEADERS.get(metric, metric.replace("_", " "))
        header += [f"{name} ours", f"{name} paper"]
    header += ["mode", "updates"]
    lines = [f"## {table.title}", "", f"Our runs: {os.path.join(workdir, '<row>', RESULT_FILE)}", "",
             "| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    modes = set()
    for row in table.rows:
        result = load_result(os.path.join(workdir, row.id, RESULT_FILE), table, row)
        cells = [row.label]
        for metric in table.metrics:
            cells += ["not run" if result is None else _fmt(_ours(result, metric)), _fmt(row.paper.get(metric))]
        if result is None:
            cells += ["-", "-"]
        else:
            modes.add(result.get("mode"))
            updates = result.get("updates")
            cells += [str(result.get("mode") or "-"), "-" if updates is None else str(updates)]
        lines.append("| " + " | ".join(cells) + " |")
    if "small" in modes:
        lines += ["", f"Note: {SMALL_NOTE}"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- figures


def _figure(width_inches: float, height_inches: float):
    """A matplotlib figure drawn by the Agg backend, without pyplot's global state."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_inches, height_inches), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def _save(fig, output: str) -> None:
    directory = os.path.dirname(os.path.abspath(output))
    os.makedirs(directory, exist_ok=True)
    ext = os.path.splitext(output)[1].lstrip(".").lower()
    if ext not in fig.canvas.get_supported_filetypes():
        raise UserError(f"cannot write {output}: unknown image type '{ext}'; use a .png, .pdf or .svg file name")
    try:
        atomic_write(output, lambda f: fig.savefig(f, dpi=DPI, format=ext), overwrite=True)
    except ValueError as e:
        raise UserError(f"cannot write {output}: {e}; use a .png, .pdf or .svg file name") from None


_METRIC_LABELS = {"ppl": "validation perplexity", "loss": "validation loss (base 2)", "bleu": "validation BLEU"}


def parse_run(text: str) -> Tuple[str, str]:
    """LABEL=TRAIN_LOG; a bare path that exists is labelled by its directory."""
    if os.path.isfile(text) or "=" not in text:
        return os.path.basename(os.path.dirname(os.path.abspath(text))), text
    label, _, path = text.partition("=")
    if not label:
        raise UserError(f"{text!r}: give LABEL=TRAIN_LOG, e.g. define=work/lstm_ptb/define/train.log")
    return label, path


def plot_curves(runs: Sequence[Tuple[str, str]], output: str, metric: str = "valid_ppl",
                title: Optional[str] = None) -> Dict[str, List[Tuple[int, float]]]:
    """Plot ``metric`` against updates, one line per (label, train log): the paper's Figure 6
    (validation perplexity over training). Returns the plotted points per label."""
    if not runs:
        raise UserError("no runs; give at least one LABEL=TRAIN_LOG")
    curves = {}
    for label, path in runs:
        if label in curves:
            raise UserError(f"label {label!r} given twice; give each run its own label")
        curves[label] = validation_curve(path, metric)
    fig = _figure(*CURVES_INCHES)
    ax = fig.add_subplot(1, 1, 1)
    for label, points in curves.items():
        x, y = zip(*points)
        ax.plot(x, y, marker="o" if len(points) <= 30 else None, markersize=3, label=label)
    ax.set_xlabel("training updates")
    if metric.endswith("ppl"):
        ax.set_yscale("log")  # early perplexities are orders of magnitude above the late ones
    ax.set_ylabel(_METRIC_LABELS.get(metric.rsplit("_", 1)[-1], metric))
    ax.set_title(title or f"{metric} over training (cf. paper Figure 6)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.subplots_adjust(left=0.14, right=0.96, top=0.9, bottom=0.12)
    _save(fig, output)
    return curves


@dataclass
class CorrelationMap:
    title: str  # "map e_i (n=..)", "expand layer l (width ..)", "e_o (m=..)"
    corr: Any  # numpy array [w, w]: M = E^T E normalised to correlations
    mean_off_diagonal: float  # mean |corr| off the diagonal


def _normalise(gram):
    """M / sqrt(diag(M) diag(M)^T): the correlations of E^T E (a dimension that is zero over
    the whole vocabulary correlates with nothing)."""
    import torch

    d = gram.diagonal().clamp_min(0).sqrt()
    scale = torch.outer(d, d)
    corr = torch.where(scale > 0, gram / scale.clamp_min(1e-300), torch.zeros_like(gram))
    return corr


def _mean_off_diagonal(corr) -> float:
    w = corr.shape[0]
    if w < 2:
        return 0.0
    a = corr.abs()
    return float((a.sum() - a.diagonal().sum()) / (w * w - w))


def token_embedding(model):
    """(the model's token embedding module, its vocabulary size): the encoder's for
    translation models, the decoder's for language models."""
    for part in ("encoder", "decoder"):
        sub = getattr(model, part, None)
        emb = getattr(sub, "embed_tokens", None) if sub is not None else None
        if emb is not None:
            return emb, len(sub.dictionary)
    raise UserError(f"{type(model).__name__} has no encoder or decoder embed_tokens to draw correlation maps of")


def correlation_maps(embed, vocab_size: int, max_tokens: Optional[int] = None, chunk: int = 2048) -> List[CorrelationMap]:
    """The correlation maps of appendix B: for E the embeddings of vocabulary indices
    0..V-1 (eval mode, no gradients), M = E^T E normalised to correlations, for (a) the map's
    output e_i (n x n; for an adaptive map its projected/concatenated output per token),
    (b) the output of each Expand layer of the DeFINE unit (captured with forward hooks),
    (c) the final embedding e_o (m x m). A token embedding without a DeFINE unit (a plain
    or adaptive table, a cached table) gives what it has."""
    import torch

    from ..modules.define_embedding import DefineEmbedding

    if max_tokens is not None and max_tokens < 1:
        raise UserError(f"--max-tokens-vocab must be at least 1, got {max_tokens}")
    count = vocab_size if max_tokens is None else min(max_tokens, vocab_size)
    is_define = isinstance(embed, DefineEmbedding)
    unit = embed.unit if is_define else None
    layers = list(unit.layers) if unit is not None else []
    residual = unit is not None and unit.skip == "residual"
    captured: List = []
    handles = [layer.register_forward_hook(lambda _m, _i, out: captured.append(out)) for layer in layers]
    grams: Dict[str, object] = {}

    def add(key, x):
        x = x.reshape(-1, x.shape[-1]).double()
        grams[key] = grams[key] + x.T @ x if key in grams else x.T @ x

    was_training = embed.training
    embed.eval()
    try:
        param = next(embed.parameters(), None)
        device = param.device if param is not None else torch.device("cpu")
        with torch.no_grad():
            for ids in torch.arange(count, device=device).split(chunk):
                if not is_define:
                    add("map", embed(ids))
                    continue
                e = embed.map_tokens(ids)  # [c, n]
                add("map", e)
                if unit is None:  # cached table (section 3.4): no unit left
                    add("final", embed.cached_table(ids))
                    continue
                captured.clear()
                add("final", unit(e))
                h = None
                for l, out in enumerate(captured):
                    h = out if h is None or not residual else h + out  # residual: h_l = h_l-1 + F(h_l-1)
                    add(f"expand{l}", h)
    finally:
        for handle in handles:
            handle.remove()
        if getattr(embed, "cached_table", None) is None:  # a cached table stays in evaluation
            embed.train(was_training)
    titles = [("map", "map e_i (n={})")]
    titles += [(f"expand{l}", f"expand layer {l + 1} (width {{}})") for l in range(len(layers))]
    if "final" in grams:
        titles.append(("final", "e_o (m={})"))
    maps = []
    for key, template in titles:
        corr = _normalise(grams[key])
        cm = CorrelationMap(template.format(corr.shape[0]), corr.float().cpu().numpy(), _mean_off_diagonal(corr))
        logger.info("%s: mean |off-diagonal correlation| %.4f over %d tokens", cm.title, cm.mean_off_diagonal, count)
        maps.append(cm)
    return maps


def plot_correlations(maps: Sequence[CorrelationMap], output: str, title: Optional[str] = None):
    """|correlation| heatmaps in one row, one panel per map, with one colourbar; the figure
    is (PANEL_INCHES x panels + COLORBAR_INCHES) x CORRELATION_HEIGHT_INCHES at DPI."""
    import numpy as np

    fig = _figure(PANEL_INCHES * len(maps) + COLORBAR_INCHES, CORRELATION_HEIGHT_INCHES)
    axes = fig.subplots(1, len(maps), squeeze=False)[0]
    image = None
    for ax, cm in zip(axes, maps):
        image = ax.imshow(np.abs(cm.corr), vmin=0.0, vmax=1.0, cmap="viridis", interpolation="nearest")
        ax.set_title(cm.title, fontsize=9)
        ax.set_xlabel(f"mean |off-diag| {cm.mean_off_diagonal:.3f}", fontsize=8)
        ax.tick_params(labelsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.subplots_adjust(left=0.3 / fig.get_figwidth(), right=1 - 1.0 / fig.get_figwidth(),
                        top=0.82 if title else 0.88, bottom=0.12, wspace=0.3)
    cax = fig.add_axes([1 - 0.8 / fig.get_figwidth(), 0.15, 0.2 / fig.get_figwidth(), 0.65])
    fig.colorbar(image, cax=cax, label="|correlation|")
    _save(fig, output)
    return fig


def load_model(path: str, data: Optional[str] = None):
    """A trained checkpoint's model, loaded with fairseq's checkpoint_utils (our
    architectures registered), on the CPU."""
    import fairseq_define  # noqa: F401  (registers the architectures)
    from .inference_checkpoint import load_model as load_checkpoint_model

    if not os.path.isfile(path):
        raise UserError(f"no such checkpoint: {path}; check --path (checkpoints are in fairseq-train's --save-dir)")
    return load_checkpoint_model(path, data)


# ---------------------------------------------------------------------------- command line


def cmd_rows(args) -> None:
    """One tab-separated line per row: row_id, arch, extra args, source, compressed."""
    table = find_table(args.table)
    for row in table.rows:
        print(row_line(row, args.small))


def cmd_record(args) -> None:
    path = record(args.table, args.row, args.run_dir, args.mode, args.arch, args.metric or ())
    print(f"wrote {path}")


def cmd_table(args) -> None:
    text = markdown_table(args.table, args.workdir)
    if args.output:
        write_text(args.output, text)
    print(text, end="")


def cmd_curves(args) -> None:
    curves = plot_curves([parse_run(r) for r in args.runs], args.output, args.metric, args.title)
    for label, points in curves.items():
        print(f"{label}: {len(points)} validations, {args.metric} {points[-1][1]:.2f} at {points[-1][0]} updates")
    print(f"wrote {args.output}")


def cmd_correlations(args) -> None:
    model = load_model(args.path, args.data)
    embed, vocab = token_embedding(model)
    maps = correlation_maps(embed, vocab, args.max_tokens_vocab)
    count = vocab if args.max_tokens_vocab is None else min(args.max_tokens_vocab, vocab)
    name = os.path.join(os.path.basename(os.path.dirname(os.path.abspath(args.path))), os.path.basename(args.path))
    title = f"{name}: correlation maps over {count} tokens"
    plot_correlations(maps, args.output, title)
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
    p.set_defaults(func=cmd_table)

    p = sub.add_parser("curves", help="validation metric vs updates (paper Figure 6)",
                       description="Plot a validation metric against training updates, one line per "
                       "run, from fairseq-train logs (json or simple format), like the paper's "
                       "Figure 6 (validation perplexity over training).")
    p.add_argument("--output", required=True, help="figure file (.png, .pdf, .svg)")
    p.add_argument("--metric", default="valid_ppl", help="valid_ppl (default), valid_loss, valid_bleu, ...")
    p.add_argument("--title", help="figure title")
    p.add_argument("runs", nargs="+", metavar="LABEL=TRAIN_LOG", help="a run's label and training log")
    p.set_defaults(func=cmd_curves)

    p = sub.add_parser("correlations", help="correlation maps of the embeddings (appendix B)",
                       description="The correlation maps of the paper's appendix B (Figures 4, 7-11): "
                       "M = E^T E, normalised to correlations, for the map e_i, each Expand layer of "
                       "the DeFINE unit, and the final embedding e_o, over the vocabulary.")
    p.add_argument("--path", required=True, help="trained checkpoint")
    p.add_argument("--output", required=True, help="figure file (.png, .pdf, .svg)")
    p.add_argument("--max-tokens-vocab", type=int, metavar="V", help="use the first V vocabulary entries (default: all)")
    p.add_argument("--data", help="data directory with the dictionaries (default: the one the checkpoint was trained on)")
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

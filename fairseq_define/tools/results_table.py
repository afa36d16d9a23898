"""Our numbers (one result.json per row) beside the paper's, as a markdown table."""

import os

from ..paper_tables import find_table
from .result_records import RESULT_FILE, load_result

SMALL_NOTE = (
    "Small runs are pipeline checks at toy scale (small data, small models, few updates): "
    "their numbers are not comparable to the paper's."
)

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


def _metric_name(metric: str) -> str:
    return _HEADERS.get(metric, metric.replace("_", " "))


def paper_numbers(table_id: str) -> str:
    """The paper's numbers of a table, one line per row ("label: metric value, ..."), for the
    recipes' --help and the docs."""
    table = find_table(table_id)
    lines = [f"{table.title}:"]
    for row in table.rows:
        cells = [f"{_metric_name(m)} {row.paper[m]:g}" for m in table.metrics if row.paper.get(m) is not None]
        lines.append(f"  {row.label}: {', '.join(cells) or 'no published number'}")
    return "\n".join(lines) + "\n"


def markdown_table(table_id: str, workdir: str = ".") -> str:
    """Our numbers (WORKDIR/<row>/result.json) beside the paper's, as a markdown table."""
    table = find_table(table_id)
    header = ["row"]
    for metric in table.metrics:
        name = _metric_name(metric)
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

"""A run's result.json: the paper table row it reproduces, the mode, the architecture, the
parameter distribution and update count read from its training log, and its metrics."""

import json
import logging
import os
from typing import Dict, Optional, Sequence, Tuple

from ..errors import UserError
from ..output_files import write_text
from ..paper_tables import RESULTS_PROG, Row, Table, find_table
from .train_log import TRAIN_LOG, finite_number, parse_params, parse_updates, read_lines

logger = logging.getLogger("fairseq_define.results")

MODES = ("small", "full")
RESULT_FILE = "result.json"


def load_model(path: str, data: Optional[str] = None):
    """A trained checkpoint's model, loaded with fairseq's checkpoint_utils (our
    architectures registered), on the CPU."""
    import fairseq_define  # noqa: F401  (registers the architectures)

    from .inference_checkpoint import load_model as load_checkpoint_model

    if not os.path.isfile(path):
        raise UserError(f"no such checkpoint: {path}; check --path (checkpoints are in fairseq-train's --save-dir)")
    return load_checkpoint_model(path, data)


def checkpoint_params(path: str) -> Dict[str, float]:
    """The paper's distribution counted on a checkpoint's model, in millions: for fairseq's
    own baselines, which log no distribution line."""
    from ..param_report import parameter_distribution

    return {k: round(v / 1e6, 2) for k, v in parameter_distribution(load_model(path)).items()}


def parse_metric(text: str) -> Tuple[str, float]:
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise UserError(f"--metric {text!r}: give NAME=VALUE, e.g. --metric valid_ppl=123.4")
    number = finite_number(value.strip())
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
    row = table.row(row_id)
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
        logger.warning(
            "table %s shows only %s; also recorded: %s", table.id, ", ".join(table.metrics), ", ".join(unknown)
        )
    log = os.path.join(run_dir, TRAIN_LOG)
    lines = read_lines(log) if os.path.isfile(log) else []
    params = parse_params(lines)
    checkpoint = os.path.join(run_dir, "checkpoint_last.pt")
    if params is None and os.path.isfile(checkpoint):
        params = checkpoint_params(checkpoint)
    return {
        "table": table.id,
        "row": row.id,
        "label": row.label,
        "mode": mode,
        "arch": arch or row.train_arch(mode == "small"),
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
        raise UserError(f"{path} is not valid JSON ({e}); record the run again with {RESULTS_PROG} record") from None
    if not isinstance(result, dict) or not isinstance(result.get("metrics"), dict):
        raise UserError(f"{path} is not a result file (no metrics); record the run again with {RESULTS_PROG} record")
    if (result.get("table"), result.get("row")) != (table.id, row.id):
        raise UserError(
            f"{path} records table {result.get('table')} row {result.get('row')}, not table {table.id} "
            f"row {row.id}; record this row's run into its own directory (--workdir/{row.id})"
        )
    return result

"""Reading fairseq-train logs (json or simple format): the parameter distribution line, the
last update count and the validation records."""

import json
import math
import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import UserError

TRAIN_LOG = "train.log"

_PARAMS = re.compile(
    r"parameters \(paper's distribution\): (?:.*?: )?DeFINE ([0-9.]+)M \| context model ([0-9.]+)M "
    r"\| input-output ([0-9.]+)M \| total ([0-9.]+)M"
)
# num_updates 200 (simple), num_updates=200 (simple train_inner), "num_updates": "200" (json)
_UPDATES = re.compile(r"num_updates\"?(?:\s*:\s*\"?|=|\s+)(\d+)")
_JSON_STATS = re.compile(r"\|\s*([\w.-]+)\s*\|\s*(\{.*\})\s*$")
_SIMPLE_VALID = re.compile(r"valid on '([^']+)' subset\s*\|(.*)$")


def read_lines(path: str) -> List[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()
    except FileNotFoundError:
        raise UserError(f"no such training log: {path}; give the file fairseq-train's output went to") from None
    except IsADirectoryError:
        raise UserError(
            f"{path} is a directory; give the training log file (e.g. {os.path.join(path, TRAIN_LOG)})"
        ) from None


def parse_params(lines: Sequence[str]) -> Optional[Dict[str, float]]:
    """The last "parameters (paper's distribution)" line, in millions, or None."""
    found = None
    for line in lines:
        m = _PARAMS.search(line)
        if m:
            found = dict(zip(("define", "context", "input_output", "total"), map(float, m.groups())))
    return found


def parse_updates(lines: Sequence[str]) -> Optional[int]:
    """The last num_updates in a fairseq-train log (json or simple format), or None."""
    last = None
    for line in lines:
        for m in _UPDATES.finditer(line):
            last = int(m.group(1))
    return last


def finite_number(value) -> Optional[float]:
    """``value`` as a finite float, or None."""
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
            if len(parts) == 2 and finite_number(parts[1]) is not None:
                record[f"{subset}_{parts[0]}"] = finite_number(parts[1])
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
    return subset, {k: finite_number(v) for k, v in stats.items() if finite_number(v) is not None}


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
    records = parse_validation(read_lines(path))
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


def train_seconds_per_update(lines: Sequence[str]) -> Optional[float]:
    """Seconds of training an update over a json log's ``train_inner`` records: fairseq's
    ``train_wall`` (the training steps alone, without validation or checkpoint saving) summed
    over the intervals, divided by their updates. The first interval of each process (the
    start-up, told by ``wall`` starting again) is left out; None without two records, and None
    where the intervals sum to 0 s (fairseq logs whole seconds: a few fast updates are below
    the log's resolution, not free)."""
    seconds, updates, last, last_wall = 0.0, 0, None, None
    for line in lines:
        m = _JSON_STATS.search(line)
        if not m or m.group(1) != "train_inner":
            continue
        try:
            stats = json.loads(m.group(2))
        except ValueError:
            continue
        done, spent, wall = (finite_number(stats.get(k)) for k in ("num_updates", "train_wall", "wall"))
        if done is None or spent is None:
            continue
        restarted = wall is not None and last_wall is not None and wall < last_wall
        if last is not None and not restarted and done > last:
            seconds += spent
            updates += int(done - last)
        last, last_wall = done, wall
    return seconds / updates if updates and seconds > 0 else None

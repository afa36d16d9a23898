"""fairseq-define-results: paper rows for recipes, result.json records, the markdown table
beside the paper's numbers, training-curve plots (Figure 6) and the correlation maps of
appendix B (Figures 4, 7-11)."""

import json
import os
import re
import shutil

import numpy as np
import pytest
import torch

from fairseq_define.errors import UserError
from fairseq_define.modules import DefineEmbedding, cache_define_tables, split_and_mix
from fairseq_define.paper_tables import TABLES
from fairseq_define.tools import correlation_maps as corr
from fairseq_define.tools import figures, result_records, results, train_log

from .helpers import define_options, model_map, run_cli

# -- real-looking fairseq-train logs ------------------------------------------------------

CONFIG_LINE = ("2026-11-22 04:04:30 | INFO | fairseq_cli.train | {'_name': None, 'common': {'log_format': "
               "'simple', 'seed': 1}, 'dataset': {'valid_subset': 'valid', 'validate_after_updates': 0}}")
PARAMS_LINE = ("2026-11-22 04:04:33 | INFO | fairseq_define.param_report | parameters (paper's distribution): "
               "define_lstm_small: DeFINE 0.34M | context model 1.91M | input-output 1.29M | total 3.54M")
SIMPLE_LOG = [
    CONFIG_LINE,
    PARAMS_LINE,
    "2026-11-22 04:05:24 | INFO | train_inner | epoch 001:    200 / 400 loss=9.552, ppl=750.56, wps=2795.7, "
    "ups=3.99, wpb=700, bsz=20, num_updates=200, lr=0.002, gnorm=0.292, train_wall=49, wall=52",
    "2026-11-22 04:06:20 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 7.916 | ar 0 | ppl 241.49 "
    "| wps 5490.5 | wpb 695.8 | bsz 20 | num_updates 400",
    "2026-11-22 04:06:20 | INFO | train | epoch 001 | loss 8.624 | ppl 394.54 | wps 2432.8 | ups 3.48 | wpb 700 "
    "| bsz 20 | num_updates 400 | lr 0.002 | gnorm 0.241 | train_wall 362 | wall 384",
    "2026-11-22 04:07:13 | INFO | train_inner | epoch 002:    200 / 400 loss=8.671, ppl=407.49, wps=2499.3, "
    "ups=3.57, wpb=700, bsz=20, num_updates=600, lr=0.002, gnorm=0.235, train_wall=55, wall=161",
    "2026-11-22 04:08:01 | INFO | valid | epoch 002 | valid on 'valid' subset | loss 7.7 | ar 0 | ppl 207.94 "
    "| wps 5411 | wpb 695.8 | bsz 20 | num_updates 800 | best_loss 7.7",
    "2026-11-22 04:08:01 | INFO | train | epoch 002 | loss 7.976 | ppl 251.79 | wps 2408.9 | ups 3.44 | wpb 700 "
    "| bsz 20 | num_updates 812 | lr 0.002 | gnorm 0.222 | train_wall 320 | wall 700",
    "2026-11-22 04:08:02 | INFO | fairseq_cli.train | done training in 700.2 seconds",
]
JSON_LOG = [
    CONFIG_LINE.replace("'simple'", "'json'"),
    PARAMS_LINE,
    '2026-11-22 04:05:24 | INFO | train_inner | {"epoch": 1, "update": 0.5, "loss": "9.552", "ppl": "750.56", '
    '"wps": "2795.7", "ups": "3.99", "wpb": "700", "bsz": "20", "num_updates": "200", "lr": "0.002", '
    '"gnorm": "0.292", "train_wall": "49", "wall": "52"}',
    '2026-11-22 04:06:20 | INFO | valid | {"epoch": 1, "valid_loss": "7.916", "valid_ppl": "241.49", '
    '"valid_wps": "5490.5", "valid_wpb": "695.8", "valid_bsz": "20", "valid_num_updates": "400"}',
    '2026-11-22 04:06:20 | INFO | train | {"epoch": 1, "train_loss": "8.624", "train_ppl": "394.54", '
    '"train_wps": "2432.8", "train_num_updates": "400", "train_lr": "0.002"}',
    '2026-11-22 04:07:13 | INFO | train_inner | {"epoch": 2, "update": 1.5, "loss": "8.671", "ppl": "407.49", '
    '"num_updates": "600", "lr": "0.002"}',
    '2026-11-22 04:08:01 | INFO | valid | {"epoch": 2, "valid_loss": "7.7", "valid_ppl": "207.94", '
    '"valid_wps": "5411", "valid_num_updates": "800", "valid_best_loss": "7.7"}',
    '2026-11-22 04:08:01 | INFO | train | {"epoch": 2, "train_loss": "7.976", "train_ppl": "251.79", '
    '"train_num_updates": "812", "train_lr": "0.002"}',
    "2026-11-22 04:08:02 | INFO | fairseq_cli.train | done training in 700.2 seconds",
]
# translation with --eval-bleu, simple format; and a run resumed from update 400 (repeats it)
NMT_BLEU_LOG = [
    "2026-11-22 04:51:10 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 9.498 | nll_loss 9.029 "
    "| ppl 522.54 | bleu 1.73 | wps 10938.5 | wpb 1089.7 | bsz 83.7 | num_updates 130",
    "2026-11-22 04:52:04 | INFO | valid | epoch 002 | valid on 'valid' subset | loss 8.678 | nll_loss 8.052 "
    "| ppl 265.39 | bleu 4.2 | wps 11048 | wpb 1089.7 | bsz 83.7 | num_updates 260 | best_loss 8.678",
    "2026-11-22 05:10:00 | INFO | fairseq.trainer | loaded checkpoint checkpoint_last.pt (epoch 1 @ 130 updates)",
    "2026-11-22 05:11:04 | INFO | valid | epoch 002 | valid on 'valid' subset | loss 8.5 | nll_loss 8.0 "
    "| ppl 250.0 | bleu 4.5 | wps 11048 | wpb 1089.7 | bsz 83.7 | num_updates 260 | best_loss 8.5",
]
NO_VALID_LOG = [CONFIG_LINE, PARAMS_LINE, SIMPLE_LOG[2], SIMPLE_LOG[4]]
LOGS = {"simple": SIMPLE_LOG, "json": JSON_LOG}


def write_log(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def cli(capsys, *argv):
    """Run the tool in-process: (exit status, stdout, stderr)."""
    code = results.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# -- log parsing --------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["simple", "json"])
def test_training_log_parsing(fmt, tmp_path):
    lines = LOGS[fmt]
    assert train_log.parse_params(lines) == {"define": 0.34, "context": 1.91, "input_output": 1.29, "total": 3.54}
    assert train_log.parse_updates(lines) == 812  # the last count seen: the end-of-epoch train line
    records = train_log.parse_validation(lines)
    assert [r["valid_num_updates"] for r in records] == [400, 800]
    assert [r["valid_ppl"] for r in records] == [241.49, 207.94]
    assert [r["valid_loss"] for r in records] == [7.916, 7.7]
    log = write_log(tmp_path / "train.log", lines)
    assert train_log.validation_curve(str(log), "valid_ppl") == [(400, 241.49), (800, 207.94)]
    assert train_log.validation_curve(str(log), "valid_loss") == [(400, 7.916), (800, 7.7)]


@pytest.mark.parametrize("line, updates", [
    ("| INFO | train_inner | epoch 003:  12 / 50 loss=4.1, ppl=17.1, num_updates=113, lr=0.001", 113),
    ('| INFO | train_inner | {"epoch": 3, "loss": "4.1", "num_updates": "113", "lr": "0.001"}', 113),
    ('| INFO | train | {"epoch": 3, "train_loss": "4.1", "train_num_updates": 113}', 113),
    ("| INFO | train | epoch 003 | loss 4.1 | ppl 17.1 | num_updates 113 | lr 0.001", 113),
    ("| INFO | fairseq_cli.train | done training in 3.2 seconds", None),
])
def test_updates_from_one_line_of_either_format(line, updates):
    assert train_log.parse_updates(["2026-11-22 04:05:24 " + line]) == updates


def _inner(updates, train_wall, wall):
    return ('| INFO | train_inner | {"epoch": 1, "num_updates": "%d", "ups": "1.5", "train_wall": "%d", '
            '"wall": "%d"}' % (updates, train_wall, wall))


@pytest.mark.parametrize("lines, seconds", [
    # the first interval (start-up: 13 s for 5 updates) left out: 7 + 9 s over 10 updates
    ([_inner(5, 13, 13), _inner(10, 7, 21), "| INFO | valid | {}", _inner(15, 9, 40)], 1.6),
    # a resumed run (wall starts again): the new process's first interval left out too
    ([_inner(50, 40, 40), _inner(100, 30, 75), _inner(100, 60, 60), _inner(150, 20, 85)], 0.5),
    ([_inner(5, 13, 13)], None),
    (["| INFO | train | epoch 003 | loss 4.1 | num_updates 113"], None),
    # intervals below the log's one-second resolution: not measured, not 0 ms an update
    ([_inner(5, 1, 1), _inner(10, 0, 1), _inner(12, 0, 1)], None),
])
def test_seconds_an_update_sum_the_training_steps_of_the_intervals(lines, seconds):
    found = train_log.train_seconds_per_update(["2026-11-22 04:05:24 " + l for l in lines])
    assert found == (seconds if seconds is None else pytest.approx(seconds))


def test_bleu_curve_keeps_the_last_value_of_a_resumed_update(tmp_path):
    log = write_log(tmp_path / "nmt" / "train.log", NMT_BLEU_LOG)
    assert train_log.validation_curve(str(log), "valid_bleu") == [(130, 1.73), (260, 4.5)]
    assert train_log.parse_params(NMT_BLEU_LOG) is None


def test_a_validation_line_without_updates_takes_the_last_count_seen():
    lines = [SIMPLE_LOG[2], "| INFO | valid | epoch 001 | valid on 'valid' subset | loss 7.9 | ppl 240.1"]
    assert train_log.parse_validation(lines)[0]["valid_num_updates"] == 200


# -- rows ---------------------------------------------------------------------------------


@pytest.mark.parametrize("small", [False, True])
@pytest.mark.parametrize("table_id", list(TABLES))
def test_rows_lists_every_row_in_five_columns(table_id, small, capsys):
    code, out, _ = cli(capsys, "rows", "--table", table_id, *(["--small"] if small else []))
    assert code == 0
    lines = out.splitlines()
    table = TABLES[table_id]
    assert len(lines) == len(table.rows) > 0
    ids = []
    for line, row in zip(lines, table.rows):
        cols = line.split("\t")
        assert len(cols) == 5, line
        ids.append(cols[0])
        assert cols[0] == row.id
        assert cols[1] == ((row.small_arch or row.arch) if small else row.arch)
        assert cols[2].split() == list(row.small_args if small else row.args)
        assert cols[3] == (row.source or "-")
        assert cols[4] == ("1" if row.compressed else "0")
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("table_id", list(TABLES))
def test_paper_prints_every_rows_published_numbers(table_id, capsys):
    """The recipes' --help shows the paper's numbers through this command: one line per row,
    its label and each number paper_tables.py holds for it."""
    code, out, _ = cli(capsys, "paper", "--table", table_id)
    assert code == 0
    table = TABLES[table_id]
    title, *lines = out.splitlines()
    assert title == f"{table.title}:" and len(lines) == len(table.rows)
    for line, row in zip(lines, table.rows):
        label, numbers = line.strip().rsplit(": ", 1)
        assert label == row.label
        published = [row.paper[m] for m in table.metrics if row.paper.get(m) is not None]
        assert [float(x) for x in re.findall(r" ([0-9.]+)(?:,|$)", numbers)] == published, line
        assert (numbers == "no published number") == (not published)


def test_rows_small_differs_from_full_where_the_table_says_so(capsys):
    _, full, _ = cli(capsys, "rows", "--table", "3")
    _, small, _ = cli(capsys, "rows", "--table", "3", "--small")
    assert full.splitlines()[1].split("\t")[:3] == ["transformer_define", "define_transformer_wmt_en_de", ""]
    # define_transformer_tiny builds the paper's output layer by default: no settings of the row's own
    assert small.splitlines()[1].split("\t")[:3] == ["transformer_define", "define_transformer_tiny", ""]
    assert small.splitlines()[0].split("\t")[2].startswith("--encoder-embed-dim 128 ")


def test_console_script_is_installed():
    out = run_cli("fairseq-define-results", "rows", "--table", "1c", "--small").stdout
    assert "awd_lstm_define\tdefine_awd_lstm_ptb_define\t--lstm-layers 2 " in out


# -- record -> table ----------------------------------------------------------------------

R3_LINE = "| R3 Adaptive + DeFINE, N=3, n=256 | 3.54 | 33.02 | 123.46 | 39.99 | 110.00 | 41.17 | small | 812 |"


@pytest.mark.parametrize("fmt", ["simple", "json"])
def test_record_then_table_shows_ours_beside_the_paper(fmt, tmp_path, capsys):
    run = tmp_path / "1a" / "r3_define_n256"
    write_log(run / "train.log", LOGS[fmt])
    code, out, _ = cli(capsys, "record", "--table", "1a", "--row", "r3_define_n256", "--run-dir", run,
                       "--mode", "small", "--arch", "define_lstm_small",
                       "--metric", "valid_ppl=123.456", "--metric", "test_ppl=110")
    assert code == 0 and "result.json" in out
    assert json.loads((run / "result.json").read_text()) == {
        "table": "1a", "row": "r3_define_n256", "label": "R3 Adaptive + DeFINE, N=3, n=256", "mode": "small",
        "arch": "define_lstm_small",
        "params": {"define": 0.34, "context": 1.91, "input_output": 1.29, "total": 3.54},
        "updates": 812, "metrics": {"valid_ppl": 123.456, "test_ppl": 110.0},
    }
    assert sorted(os.listdir(run)) == ["result.json", "train.log"]  # no temporary file left

    md = tmp_path / "table_1a.md"
    code, out, _ = cli(capsys, "table", "--table", "1a", "--workdir", tmp_path / "1a", "--output", md)
    assert code == 0
    assert md.read_text() == out
    lines = out.splitlines()
    assert lines[0] == "## LSTM language model on WikiText-103 (Table 1a)"
    assert ("| row | params (M) ours | params (M) paper | valid ppl ours | valid ppl paper | test ppl ours "
            "| test ppl paper | mode | updates |") in lines
    assert R3_LINE in lines
    assert "| R1 Standard, n=256 | not run | 92.17 | not run | 43.24 | not run | 44.12 | - | - |" in lines
    assert any("pipeline checks at toy scale" in line and "not comparable" in line for line in lines)


def test_full_run_without_log_has_no_toy_note_and_null_params(tmp_path, capsys):
    run = tmp_path / "standard_d410"
    run.mkdir()
    assert cli(capsys, "record", "--table", "2", "--row", "standard_d410", "--run-dir", run, "--mode", "full",
               "--metric", "test_ppl=25.5", "--metric", "params=150.9")[0] == 0
    result = json.loads((run / "result.json").read_text())
    assert result["params"] is None and result["updates"] is None
    assert result["arch"] == "define_txl_wt103_standard_d410"
    code, out, _ = cli(capsys, "table", "--table", "2", "--workdir", tmp_path)
    assert code == 0
    # the paper has no validation perplexity for this row
    assert "| Standard, n=d=410, inner 2100 (Dai et al.) | 150.90 | 151.11 | - | - | 25.50 | 24.03 | full | - |" in out
    assert "toy scale" not in out


def test_record_again_replaces_the_result(tmp_path, capsys):
    run = tmp_path / "define"
    run.mkdir()
    for value in ("40.5", "38.25"):
        assert cli(capsys, "record", "--table", "8", "--row", "define", "--run-dir", run,
                   "--metric", f"test_ppl={value}")[0] == 0
    assert json.loads((run / "result.json").read_text())["metrics"] == {"test_ppl": 38.25}
    assert os.listdir(run) == ["result.json"]


def test_table_with_no_runs_marks_every_row_not_run(tmp_path, capsys):
    code, out, _ = cli(capsys, "table", "--table", "5", "--workdir", tmp_path)
    assert code == 0
    rows = [line for line in out.splitlines() if line.startswith("| ") and not line.startswith("| row ")]
    assert len(rows) == len(TABLES["5"].rows)
    assert all(row.count("not run") == 2 for row in rows)  # table_mb and test_ppl
    assert "| DeFINE, n=128, 32 x 16 codes | not run | 21.00 | not run | 26.03 | - | - |" in rows
    assert "toy scale" not in out


# -- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, message",
    [
        (["rows", "--table", "4"], "unknown paper table '4'; use one of 1a, 1c, 2, 3, 5, 6, 7, 8"),
        (["table", "--table", "9"], "unknown paper table '9'"),
        (
            ["record", "--table", "1a", "--row", "r9", "--metric", "valid_ppl=1"],
            "table 1a has no row 'r9'; use one of r1_standard",
        ),
        (
            ["record", "--table", "1a", "--row", "r1_standard", "--metric", "valid_ppl=abc"],
            "'abc' is not a finite number",
        ),
        (
            ["record", "--table", "1a", "--row", "r1_standard", "--metric", "valid_ppl=nan"],
            "'nan' is not a finite number",
        ),
        (["record", "--table", "1a", "--row", "r1_standard", "--metric", "valid_ppl"], "give NAME=VALUE"),
        (
            ["record", "--table", "1a", "--row", "r1_standard", "--metric", "test_ppl=1", "--metric", "test_ppl=2"],
            "given twice",
        ),
        (["record", "--table", "1a", "--row", "r1_standard"], "give at least one --metric"),
    ],
)
def test_bad_record_and_table_input_is_a_clear_error(argv, message, tmp_path, capsys):
    if argv[0] == "record":
        argv = argv + ["--run-dir", str(tmp_path)]
    code, out, err = cli(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("fairseq-define-results: error: ") and message in err
    assert not (tmp_path / "result.json").exists()


def test_missing_run_dir_is_a_clear_error(tmp_path, capsys):
    code, _, err = cli(capsys, "record", "--table", "1a", "--row", "r1_standard", "--run-dir", tmp_path / "nope",
                       "--metric", "test_ppl=1")
    assert code == 2 and "no run directory" in err


def test_a_result_of_another_row_is_refused(tmp_path, capsys):
    (tmp_path / "r2_adaptive").mkdir()
    cli(capsys, "record", "--table", "1a", "--row", "r2_adaptive", "--run-dir", tmp_path / "r2_adaptive",
        "--metric", "test_ppl=50")
    os.rename(tmp_path / "r2_adaptive", tmp_path / "r1_standard")
    code, _, err = cli(capsys, "table", "--table", "1a", "--workdir", tmp_path)
    assert code == 2 and "records table 1a row r2_adaptive, not table 1a row r1_standard" in err
    (tmp_path / "r1_standard" / "result.json").write_text("{not json")
    code, _, err = cli(capsys, "table", "--table", "1a", "--workdir", tmp_path)
    assert code == 2 and "is not valid JSON" in err


def test_curves_of_a_log_without_validation_is_a_clear_error(tmp_path, capsys):
    log = write_log(tmp_path / "run" / "train.log", NO_VALID_LOG)
    code, _, err = cli(capsys, "curves", "--output", tmp_path / "c.png", f"run={log}")
    assert code == 2 and "has no validation lines" in err and "--disable-validation" in err
    assert not (tmp_path / "c.png").exists()
    good = write_log(tmp_path / "good" / "train.log", SIMPLE_LOG)
    code, _, err = cli(capsys, "curves", "--output", tmp_path / "c.png", "--metric", "valid_bleu", f"good={good}")
    assert code == 2 and "no valid_bleu" in err and "valid_ppl" in err
    code, _, err = cli(capsys, "curves", "--output", tmp_path / "c.png", f"x={tmp_path / 'missing.log'}")
    assert code == 2 and "no such training log" in err


# -- figures ------------------------------------------------------------------------------


def read_png(path):
    from matplotlib.image import imread

    assert path.is_file()
    return imread(str(path))  # [H, W, RGBA] floats in 0..1


def pixel_std(image):
    """The largest per-channel standard deviation over the pixels: 0 for a uniform area."""
    return image[..., :3].reshape(-1, 3).std(axis=0).max()


def assert_drawn(image, width, height):
    assert image.shape[:2] == (height, width)
    assert pixel_std(image) > 0.1  # not a blank canvas


def test_curves_plot_every_run(tmp_path, capsys):
    logs = [write_log(tmp_path / name / "train.log", LOGS[name]) for name in ("simple", "json")]
    out_png = tmp_path / "fig" / "curves.png"
    code, out, _ = cli(capsys, "curves", "--output", out_png, "--title", "valid ppl", f"a={logs[0]}", f"b={logs[1]}")
    assert code == 0
    assert "a: 2 validations, valid_ppl 207.94 at 800 updates" in out
    assert "b: 2 validations, valid_ppl 207.94 at 800 updates" in out
    image = read_png(out_png)
    assert_drawn(image, 640, 480)
    # the curves themselves: coloured pixels beyond the legend's two short samples
    assert (np.ptp(image[..., :3], axis=-1) > 0.3).sum() > 400
    nmt = write_log(tmp_path / "nmt" / "train.log", NMT_BLEU_LOG)
    assert cli(capsys, "curves", "--output", tmp_path / "bleu.png", "--metric", "valid_bleu", nmt)[0] == 0
    assert_drawn(read_png(tmp_path / "bleu.png"), 640, 480)


def manual_corr(x):
    x = x.detach().double().reshape(-1, x.shape[-1]).numpy()
    gram = x.T @ x
    d = np.sqrt(np.diag(gram))
    return gram / np.outer(d, d)


def expand_outputs(emb, e):
    """The Expand layers' outputs, computed without hooks."""
    unit = emb.unit
    outs = [unit.layers[0](e)]
    for layer in unit.layers[1:]:
        h = outs[-1]
        if unit.skip == "mix":
            outs.append(layer(split_and_mix(e, h, layer.transform.groups)))
        elif unit.skip == "residual":
            outs.append(h + layer(h))
        else:
            raise AssertionError(unit.skip)
    return outs


@pytest.mark.parametrize("transform, depth", [("define", 3), ("define", 5), ("define_residual", 3)])
@pytest.mark.parametrize("map_kind", ["standard", "adaptive"])
def test_correlation_maps_of_a_define_embedding(transform, depth, map_kind):
    torch.manual_seed(0)
    emb = DefineEmbedding(define_options(define_transform=transform, define_depth=depth), 40, 1, 24,
                          map_layer=model_map(map_kind))
    maps = corr.correlation_maps(emb, 40, chunk=16)  # several chunks
    assert emb.training  # the mode is restored
    assert len(maps) == 2 + depth
    assert [m.title for m in maps] == (
        ["map e_i (n=16)"] + [f"expand layer {l + 1} (width {w})" for l, w in enumerate(emb.schedule.layer_out)]
        + ["e_o (m=24)"])
    emb.eval()
    with torch.no_grad():
        ids = torch.arange(40)
        e = emb.map(ids[None])[0] * emb.map_scale  # the map over the vocabulary, as a batch of one
        expected = [e] + expand_outputs(emb, e) + [emb(ids[None])[0]]
    for cm, x in zip(maps, expected):
        want = manual_corr(x)
        np.testing.assert_allclose(cm.corr, want, atol=1e-5, err_msg=cm.title)
        off = ~np.eye(len(want), dtype=bool)
        assert cm.mean_off_diagonal == pytest.approx(np.abs(want[off]).mean(), abs=1e-6)


def test_correlation_maps_of_the_first_tokens_and_of_embeddings_without_a_unit():
    torch.manual_seed(0)
    emb = DefineEmbedding(define_options(define_transform="projective"), 40, 1, 24)
    maps = corr.correlation_maps(emb, 40, max_tokens=10)
    assert [m.title for m in maps] == ["map e_i (n=16)", "e_o (m=24)"]
    np.testing.assert_allclose(maps[0].corr, manual_corr(emb.map.weight[:10]), atol=1e-5)
    table = torch.nn.Embedding(40, 8)
    (only,) = corr.correlation_maps(table, 40)
    assert only.title == "map e_i (n=8)"
    np.testing.assert_allclose(only.corr, manual_corr(table.weight), atol=1e-5)
    # cached tables (section 3.4): the unit is gone; e_o is the cached table
    define = DefineEmbedding(define_options(), 40, 1, 24)
    live = corr.correlation_maps(define, 40)
    cache_define_tables(define)
    cached = corr.correlation_maps(define, 40)
    assert [m.title for m in cached] == ["map e_i (n=16)", "e_o (m=24)"]
    np.testing.assert_allclose(cached[1].corr, live[-1].corr, atol=1e-5)
    with pytest.raises(UserError, match="at least 1"):
        corr.correlation_maps(define, 40, max_tokens=0)


def test_translation_models_use_the_encoder_embedding():
    from fairseq import options
    from fairseq.models import build_model

    from fairseq_define.models.without_data import VocabularyOnlyTask, dictionary_of_size

    parser = options.get_training_parser(default_task="translation")
    args = options.parse_args_and_arch(parser, input_args=[
        "-", "--task", "translation", "--arch", "define_transformer_tiny", "--encoder-layers", "1",
        "--decoder-layers", "1", "--define-map-dim", "16", "--define-expand-dim", "64"])
    model = build_model(args, VocabularyOnlyTask(dictionary_of_size(30), dictionary_of_size(50)))
    embed, vocab = corr.token_embedding(model)
    assert embed is model.encoder.embed_tokens and vocab == 30


@pytest.fixture(scope="module")
def tiny_lm_checkpoint(tmp_path_factory):
    """A small DeFINE LSTM language model (N=3, adaptive map), saved as fairseq saves one."""
    from fairseq import checkpoint_utils, options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from omegaconf import OmegaConf

    d = tmp_path_factory.mktemp("tiny_lm")
    (d / "dict.txt").write_text("".join(f"w{i} {1000 - i}\n" for i in range(60)), encoding="utf-8")
    parser = options.get_training_parser(default_task="language_modeling")
    args = options.parse_args_and_arch(parser, input_args=[
        str(d), "--task", "language_modeling", "--arch", "define_lstm_lm", "--lstm-layers", "1",
        "--lstm-hidden-dim", "16", "--define-transform", "define", "--define-map-dim", "16",
        "--define-expand-dim", "32", "--define-depth", "3", "--define-out-dim", "24",
        "--adaptive-cutoff", "20,40", "--div-val", "2", "--seed", "3", "--cpu"])
    cfg = convert_namespace_to_omegaconf(args)
    torch.manual_seed(3)
    model = tasks.setup_task(cfg.task).build_model(cfg.model)
    state = {"args": None, "cfg": OmegaConf.to_container(cfg, resolve=True, enum_to_str=True),
             "model": model.state_dict(), "extra_state": {}, "last_optimizer_state": None,
             "optimizer_history": [{"criterion_name": "CrossEntropyCriterion", "optimizer_name": "adam",
                                    "lr_scheduler_state": {"best": None}, "num_updates": 0}]}
    path = d / "checkpoint_best.pt"
    checkpoint_utils.torch_persistent_save(state, str(path))
    return path, model


def test_correlations_cli_draws_one_panel_per_map(tiny_lm_checkpoint, tmp_path, capsys):
    path, model = tiny_lm_checkpoint
    depth = 3  # --define-depth
    assert len(model.decoder.embed_tokens.unit.layers) == depth
    png = tmp_path / "corr.png"
    code, out, _ = cli(capsys, "correlations", "--path", path, "--output", png)
    assert code == 0
    lines = [line for line in out.splitlines() if ": mean |off-diagonal correlation| " in line]
    assert len(lines) == 2 + depth
    assert lines[0].startswith("map e_i (n=16): ") and lines[-1].startswith("e_o (m=24): ")
    assert all(line.startswith(f"expand layer {l + 1} (width ") for l, line in enumerate(lines[1:-1]))
    assert "64 of 64 vocabulary entries" in out and f"({2 + depth} panels)" in out
    # the numbers are those of the saved weights
    expected = corr.correlation_maps(model.decoder.embed_tokens, 64)
    assert [float(line.rsplit(" ", 1)[1]) for line in lines] == [round(m.mean_off_diagonal, 4) for m in expected]
    width = (corr.PANEL_INCHES * (2 + depth) + corr.COLORBAR_INCHES) * figures.DPI
    assert width == 1600
    assert_drawn(read_png(png), width, 350)

    code, out, _ = cli(
        capsys, "correlations", "--path", path, "--output", tmp_path / "c10.png", "--max-tokens-vocab", "10"
    )
    assert code == 0 and "10 of 64 vocabulary entries" in out


def test_correlations_of_a_missing_checkpoint_is_a_clear_error(tmp_path, capsys):
    code, _, err = cli(capsys, "correlations", "--path", tmp_path / "nope.pt", "--output", tmp_path / "c.png")
    assert code == 2 and "no such checkpoint" in err and "--path" in err


def test_plot_correlations_draws_each_map_in_its_panel(tmp_path):
    maps = [corr.CorrelationMap(f"p{i}", np.corrcoef(np.random.RandomState(i).randn(8, 50)), 0.5) for i in range(3)]
    fig = corr.plot_correlations(maps, str(tmp_path / "three.png"))
    image = read_png(tmp_path / "three.png")
    assert_drawn(image, 1000, 350)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == ["p0", "p1", "p2"]
    for ax in panels:  # inside each panel's frame: the heatmap, not a uniform area
        box = ax.get_window_extent()
        crop = image[350 - int(box.y1) + 2:350 - int(box.y0) - 2, int(box.x0) + 2:int(box.x1) - 2, :3]
        assert crop.shape[0] > 100 and crop.shape[1] > 100
        assert pixel_std(crop) > 0.05, ax.get_title()


def test_record_counts_parameters_on_the_checkpoint_when_the_log_has_no_distribution(tiny_lm_checkpoint, tmp_path):
    """fairseq's baselines log no distribution line: the record counts it on checkpoint_last.pt."""
    from fairseq_define.param_report import parameter_distribution

    path, model = tiny_lm_checkpoint
    run = tmp_path / "awd_lstm"
    run.mkdir()
    shutil.copy(path, run / "checkpoint_last.pt")
    (run / "train.log").write_text(
        "2026-11-22 05:47:46 | INFO | fairseq_cli.train | num. shared model params: 9,999,999 (num. trained: "
        "9,999,999)\n"
    )
    result = result_records.build_result("1c", "awd_lstm", str(run), metrics=["valid_ppl=100"])
    expected = {k: round(v / 1e6, 2) for k, v in parameter_distribution(model).items()}
    assert result["params"] == expected
    assert 0 < result["params"]["total"] < 1  # the tiny model, not fairseq's 10M count

"""fairseq-define-params (in process): the LSTM tables 6, 7, 8 (every column), Table 3, the
``--arch`` report and ``--baseline``, against counts made here independently: closed forms
for the Transformer and the unit, sums over the built model's parameters by name, and the
paper's numbers as paper_tables.py holds them."""

import re

import pytest

from fairseq_define.tools.paper_tables import TABLE_6, TABLE_7, TABLE_8, TABLES, params_split
from fairseq_define.tools.params import WT103_VOCAB, build_arch, cli_main

CELL = r"([0-9.]+) \(([0-9.]+|-)\)"  # "ours (paper)"


def run(capsys, *argv):
    assert cli_main(list(argv)) == 0
    return capsys.readouterr().out


def table_rows(out, names):
    """{row name: [(ours, paper or None)] x (DeFINE, context, input-output, total)}."""
    parsed = {}
    for name in names:
        line = next(l for l in out.splitlines() if l.startswith(name + " "))
        cells = re.findall(CELL, line)
        assert len(cells) == 4, line
        parsed[name] = [(float(o), None if p == "-" else float(p)) for o, p in cells]
    return parsed


def transformer_closed_form(V, d, f, enc_layers, dec_layers, embeddings=3):
    """fairseq's post-norm Transformer with sinusoidal positions: attention 4(d^2 + d),
    feed-forward 2df + f + d, 2 (encoder) or 3 (decoder) LayerNorms of 2d, and ``embeddings``
    V x d tables (source, target, output projection)."""
    attn, ffn, ln = 4 * (d * d + d), 2 * d * f + f + d, 2 * d
    return enc_layers * (attn + ffn + 2 * ln) + dec_layers * (2 * attn + ffn + 3 * ln) + embeddings * V * d


LM_ROWS = {f"{t.id}:{r.id}": r for t in TABLES.values() if t.task == "lm" and "params" in t.metrics for r in t.rows}


@pytest.mark.parametrize("row", LM_ROWS.values(), ids=LM_ROWS.keys())
def test_paper_params_split_adds_up_to_the_total(row):
    define, context, io, total = params_split(row)
    assert total == row.paper["params"]
    if context is not None:
        assert abs(define + context + io - total) <= 0.015, row.id  # each rounded to 0.01 in the paper


@pytest.mark.parametrize("table", [TABLE_6, TABLE_7, TABLE_8], ids=lambda t: t.id)
def test_lstm_table_columns(capsys, table):
    parsed = table_rows(run(capsys, "--paper-table", table.id), [r.name for r in table.rows])
    for row in table.rows:
        name, arch = row.name, row.arch
        (define, p_define), (context, p_context), (io, p_io), (total, p_total) = parsed[name]
        # the paper's numbers as paper_tables.py holds them, printed on the row's own line
        assert (p_define, p_context, p_io, p_total) == params_split(row), name
        # context model and input-output reproduce the paper exactly (2 decimals)
        if p_context is not None:
            assert (context, io) == (p_context, p_io), name
        model, _ = build_arch(arch, WT103_VOCAB)
        named = dict(model.named_parameters())
        unit = sum(p.numel() for k, p in named.items() if ".unit." in k) / 1e6
        assert abs(define - unit) <= 0.005, (name, define, unit)
        assert abs(total - sum(p.numel() for p in named.values()) / 1e6) <= 0.005, name
        assert abs(total - (define + context + io)) <= 0.015, name  # each rounded to 0.01
        if name in ("Linear", "GLT", "GLT + Shuffle"):  # g_max does not matter here
            # within the unit's biases and LayerNorms, which the paper's count leaves out (6a)
            assert abs(total - p_total) <= 0.02 + 1e-9, (name, total, p_total)


def test_table_6a_linear_and_glt_stacks_equal_the_paper(capsys):
    out = run(capsys, "--paper-table", "6a")
    for name in ("Linear", "GLT", "GLT + Shuffle"):
        line = next(l for l in out.splitlines() if l.startswith(name + " "))
        ours, paper = re.search(r"([0-9.]+)M\s+([0-9.]+)M", line).groups()
        assert ours == paper, line


def test_table_3_totals_and_ratio(capsys):
    out = run(capsys, "--paper-table", "3")
    lines = re.findall(r"^(\S+): DeFINE .* total ([0-9.]+)M$", out, re.M)
    totals = dict(lines[:1])  # the baseline
    base = transformer_closed_form(32000, 512, 2048, 6, 6)
    assert float(totals["transformer_wmt_en_de"]) == round(base / 1e6, 2)  # 93.29M
    # then the DeFINE model with the paper's unit and with the authors' unit, in that order
    assert [name for name, _ in lines[1:]] == ["define_transformer_wmt_en_de"] * 2
    for (_, total), style in zip(lines[1:], ("paper", "authors")):
        model, _ = build_arch("define_transformer_wmt_en_de", 32000, None, ["--define-style", style])
        ours = sum(p.numel() for p in model.parameters())
        assert float(total) == round(ours / 1e6, 2), style
        ratio = float(re.search(
            rf"ratio define_transformer_wmt_en_de \({style} unit\) / transformer_wmt_en_de = ([0-9.]+)", out
        ).group(1))
        assert ratio == round(ours / base, 3), style


def unit_closed_form(describe):
    """Parameters of a unit from its printed schedule "Expand a->b/gG ..., Reduce c->m/gR":
    weights in*out/g, a bias and a LayerNorm (2 per feature) after each Expand layer, a bias
    on Reduce."""
    total = 0
    for i, o, g in re.findall(r"(\d+)->(\d+)/g(\d+)", describe.split("Reduce")[0]):
        total += int(i) * int(o) // int(g) + 3 * int(o)
    i, m, g = map(int, re.search(r"Reduce (\d+)->(\d+)/g(\d+)", describe).groups())
    return total + i * m // g + m


def test_arch_report_with_a_baseline(capsys):
    out = run(capsys, "--arch", "define_transformer_tiny", "--vocab-size", "8000", "--define-map-dim", "64",
              "--baseline", "transformer")
    units = re.findall(r"^  unit ([0-9.]+)M: (.*)$", out, re.M)
    assert len(units) == 2  # encoder and decoder
    for size, describe in units:
        assert "Expand 64->" in describe  # the extra flag reached the architecture
        assert float(size) == round(unit_closed_form(describe) / 1e6, 3)
    ours = float(re.search(r"^define_transformer_tiny: DeFINE ([0-9.]+)M .* total ([0-9.]+)M$", out, re.M).group(2))
    base = float(re.search(r"^transformer \(same sizes\): .* total ([0-9.]+)M$", out, re.M).group(1))
    # fairseq's transformer at the tiny sizes (d=128, inner 512, 3+3 layers), three 8000 x 128 tables
    assert base == round(transformer_closed_form(8000, 128, 512, 3, 3) / 1e6, 2)
    ratio = float(re.search(r"ratio define_transformer_tiny / transformer = ([0-9.]+)", out).group(1))
    assert abs(ratio - ours / base) <= 0.005

"""The paper's facts: its result tables as data. For every row, the architecture that
reproduces it (by name: its model file registers it with its settings, :attr:`Row.settings`),
the extra training settings of its full-scale run and of its small CPU run, and the numbers
the paper reports. The one home of these rows and numbers, above the models and below the
tools: the recipes in ``run_scripts/`` read their rows (``fairseq-define-results rows``) and
the paper's numbers (``fairseq-define-results paper``), the results tool prints our numbers
beside these, and ``fairseq-define-params --paper-table`` its parameter counts.

Paper numbers are from the ICLR 2020 version: Tables 1a, 1c, 2a, 3, 5, 6, 7, 8 (parameters in
millions, split into DeFINE / context model / input-output where the paper does; perplexity
for the language models; BLEU for translation).
"""

from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional, Tuple

from .errors import UserError
from .models import define_transformer, define_transformer_lm, lstm_lm, transformer_xl  # noqa: F401  (the archs)
from .models.named_architectures import preset

RESULTS_PROG = "fairseq-define-results"


@dataclass(frozen=True)
class Row:
    id: str  # run directory name, unique in its table
    label: str  # the paper's row label
    arch: str  # registered architecture of the full-scale run
    # params (M; with define / context / input_output where the paper splits them), valid/test
    # ppl, or bleu_newstest2014/2017
    paper: Dict[str, Optional[float]]
    args: Tuple[str, ...] = ()  # extra fairseq-train arguments, full scale
    small_args: Tuple[str, ...] = ()  # extra fairseq-train arguments of the small CPU run
    small_arch: Optional[str] = None  # architecture of the small run (default: arch)
    source: Optional[str] = None  # Table 5: the Table 2 row whose model is compressed
    compressed: bool = False  # Table 5: evaluate the compressed model
    short: Optional[str] = None  # the row's name in fairseq-define-params (default: label)
    # Tables 6-8 give totals only: the Table 1a row with the same context model and
    # input-output layers (n = m), from which their DeFINE share follows
    shared_with: Optional[str] = None

    @property
    def settings(self) -> Optional[Mapping[str, object]]:
        """The model settings that ``arch`` fills (its model file's preset); None: fairseq's own arch."""
        return preset(self.arch)

    @property
    def name(self) -> str:
        return self.short or self.label

    def train_arch(self, small: bool) -> str:
        return (self.small_arch or self.arch) if small else self.arch

    def train_args(self, small: bool) -> Tuple[str, ...]:
        return self.small_args if small else self.args


@dataclass(frozen=True)
class Table:
    id: str
    title: str
    task: str  # "lm" or "nmt"
    dataset: str  # full-scale data (small mode: see run_scripts/)
    metrics: Tuple[str, ...]  # the columns, in order
    rows: Tuple[Row, ...] = field(default_factory=tuple)

    def row(self, row_id: str) -> Row:
        for r in self.rows:
            if r.id == row_id:
                return r
        raise UserError(
            f"table {self.id} has no row {row_id!r}; use one of {', '.join(r.id for r in self.rows)} "
            f"({RESULTS_PROG} rows --table {self.id} lists them)"
        )


def _ppl(params, valid, test, split=None, ms=None):
    """The paper's numbers of a language model row; ``split``: its (DeFINE, context model,
    input-output) parameters where the paper gives them; ``ms``: its training time, ms a batch
    (Table 1a; not a column ours are set beside)."""
    paper = {"params": params, "valid_ppl": valid, "test_ppl": test}
    if split is not None:
        paper.update(zip(("define", "context", "input_output"), split))
    if ms is not None:
        paper["ms_per_batch"] = ms
    return paper


# -- LSTM on WikiText-103 (Tables 1a, 6, 7, 8), models/lstm_lm.py (the settings of each row's
# architecture). Small runs: WikiText-2, 2 LSTM layers of 256, adaptive bands 2000/8000, n/8
# and k/4 of the paper's sizes, the same depth N.
_LSTM_SMALL = ("--lstm-layers", "2", "--lstm-hidden-dim", "256")
_ADAPTIVE_SMALL = ("--adaptive-cutoff", "2000,8000")


def _lstm_small(settings: Mapping[str, object]) -> Tuple[str, ...]:
    """The small run of a full-scale LSTM row: n/8, and k/4 where the row has a unit."""
    n, k = settings["define_map_dim"], settings.get("define_expand_dim")
    dims = ("--define-map-dim", str(n // 8)) + (("--define-expand-dim", str(k // 4)) if k else ())
    return _LSTM_SMALL + (_ADAPTIVE_SMALL if settings["adaptive_cutoff"] else ()) + dims


def _lstm_row(row_id: str, label: str, arch: str, paper: dict, small_extra=(), **kw) -> Row:
    return Row(row_id, label, arch, paper, small_args=_lstm_small(preset(arch)) + tuple(small_extra), **kw)


TABLE_1A = Table(
    "1a", "LSTM language model on WikiText-103 (Table 1a)", "lm", "wikitext-103",
    ("params", "valid_ppl", "test_ppl"),
    (
        _lstm_row("r1_standard", "R1 Standard, n=256", "define_lstm_wt103_r1_standard",
                  _ppl(92.17, 43.24, 44.12, (0.0, 23.36, 68.81), ms=1150), short="R1 standard n=256",
                  args=("--criterion", "cross_entropy"),  # a full softmax: no adaptive bands
                  small_extra=("--criterion", "cross_entropy")),
        _lstm_row("r2_adaptive", "R2 Adaptive, n=256", "define_lstm_wt103_r2_adaptive",
                  _ppl(32.61, 43.49, 44.87, (0.0, 23.36, 9.25), ms=297), short="R2 adaptive n=256"),
        _lstm_row("r3_define_n256", "R3 Adaptive + DeFINE, N=3, n=256", "define_lstm_wt103_r3_define_n256",
                  _ppl(33.02, 39.99, 41.17, (0.41, 23.36, 9.25), ms=298), short="R3 DeFINE N=3 n=256"),
        _lstm_row("r4_define_n384", "R4 Adaptive + DeFINE, N=7, n=384", "define_lstm_wt103_r4_define_n384",
                  _ppl(40.46, 36.95, 38.01, (1.83, 24.73, 13.90), ms=364), short="R4 DeFINE N=7 n=384"),
        _lstm_row("r5_define_n512", "R5 Adaptive + DeFINE, N=11, n=512", "define_lstm_wt103_r5_define_n512",
                  _ppl(48.69, 34.94, 35.94, (3.89, 26.24, 18.55), ms=459), short="R5 DeFINE N=11 n=512"),
    ),
)

# Table 6: N=7, n=m=384, k=1024; GLT uses 4 groups in every layer and in Reduce, the others
# the default g_max. (transform, label, arch, params, valid, test)
_T6 = (("linear", "Linear", "define_lstm_wt103_t6_linear", 42.86, 39.89, 41.19),
       ("glt", "GLT", "define_lstm_wt103_t6_glt", 39.69, 44.28, 45.63),
       ("glt_shuffle", "GLT + Shuffle", "define_lstm_wt103_t6_glt_shuffle", 39.69, 44.08, 45.25),
       ("hgt", "HGT", "define_lstm_wt103_t6_hgt", 40.73, 39.79, 40.92),
       ("define_nomix", "DeFINE (w/o mixer)", "define_lstm_wt103_t6_define_nomix", 40.89, 37.84, 38.91),
       ("define", "DeFINE", "define_lstm_wt103_t6_define", 40.89, 36.95, 38.01))
TABLE_6 = Table(
    "6", "Transformations in DeFINE, LSTM on WikiText-103, N=7, n=m=384, k=1024 (Table 6)", "lm",
    "wikitext-103", ("params", "valid_ppl", "test_ppl"),
    # small: 4 groups at most (GLT: everywhere), as the default g_max = 2 at m = 48 would leave
    # one group after the first layer, where mixing the input in equals concatenating it
    tuple(_lstm_row(t, label, arch, _ppl(p, v, te), shared_with="r4_define_n384",
                    small_extra=("--define-max-groups", "4"))
          for t, label, arch, p, v, te in _T6),
)

_T1A_AT = {256: "r3_define_n256", 384: "r4_define_n384", 512: "r5_define_n512"}  # Table 1a's row at n = m
# (N, n = m, ((k, arch, params, valid, test), ...))
_T7 = ((3, 256, ((1024, "define_lstm_wt103_t7_n3_k1024", 33.02, 39.99, 41.17),
                 (1536, "define_lstm_wt103_t7_n3_k1536", 33.15, 40.08, 41.25),
                 (2048, "define_lstm_wt103_t7_n3_k2048", 33.29, 40.23, 41.37))),
       (7, 384, ((1024, "define_lstm_wt103_t7_n7_k1024", 40.73, 36.95, 38.01),
                 (1536, "define_lstm_wt103_t7_n7_k1536", 41.86, 36.85, 37.81),
                 (2048, "define_lstm_wt103_t7_n7_k2048", 43.19, 36.95, 37.84))),
       (11, 512, ((1024, "define_lstm_wt103_t7_n11_k1024", 49.55, 34.94, 35.94),
                  (1536, "define_lstm_wt103_t7_n11_k1536", 52.02, 35.25, 35.98),
                  (2048, "define_lstm_wt103_t7_n11_k2048", 55.02, 35.00, 35.92))))
TABLE_7 = Table(
    "7", "Depth N and width k of DeFINE, LSTM on WikiText-103, n=m (Table 7)", "lm", "wikitext-103",
    ("params", "valid_ppl", "test_ppl"),
    tuple(_lstm_row(f"n{N}_k{k}", f"N={N}, n=m={n}, k={k}", arch, _ppl(p, v, te),
                    short=f"N={N} n=m={n} k={k}", shared_with=_T1A_AT[n])
          for N, n, rows in _T7 for k, arch, p, v, te in rows),
)

TABLE_8 = Table(
    "8",
    "Skip connections and the Reduce step, LSTM on WikiText-103, N=7, n=384 (Table 8)",
    "lm",
    "wikitext-103",
    ("params", "valid_ppl", "test_ppl"),
    (
        # residual connections: the Expand widths k/2
        _lstm_row(
            "residual",
            "8a DeFINE + residual connections",
            "define_lstm_wt103_t8_residual",
            _ppl(41.63, 38.96, 40.03),
            short="8a DeFINE + residual",
            shared_with="r4_define_n384",
        ),
        _lstm_row(
            "define",
            "8a/8b DeFINE (MER)",
            "define_lstm_wt103_t6_define",
            TABLE_6.row("define").paper,  # Table 6's
            short="8a/b DeFINE (MER)",
            shared_with="r4_define_n384",
        ),
        # without Reduce the LSTM reads e_hat (k dims), so its context model is not Table 1a's
        _lstm_row("no_reduce", "8b MER - Reduce", "define_lstm_wt103_t8_no_reduce", _ppl(43.91, 37.19, 38.34)),
    ),
)

# -- AWD-LSTM on PTB (Table 1c), models/lstm_lm.py: 3 layers of 1150, the last n wide;
# Merity et al.'s dropouts. Small: 2 layers of 256, n=128 (AWD) or n=32 -> m=128 (DeFINE).
TABLE_1C = Table(
    "1c", "AWD-LSTM on Penn Treebank, no finetuning (Table 1c)", "lm", "ptb",
    ("params", "valid_ppl", "test_ppl"),
    (
        # a standard 400-dim table, tied
        Row("awd_lstm", "AWD-LSTM (Merity et al., 2018b)", "define_awd_lstm_ptb", _ppl(24.0, 61.2, 58.8),
            short="AWD-LSTM",
            small_args=("--lstm-layers", "2", "--lstm-hidden-dim", "256", "--define-map-dim", "128")),
        # n=128, k=1024, N=7, m=400; the output tied at n=128
        Row("awd_lstm_define", "AWD-LSTM + DeFINE", "define_awd_lstm_ptb_define", _ppl(20.0, 56.5, 54.2),
            small_args=("--lstm-layers", "2", "--lstm-hidden-dim", "256", "--define-map-dim", "32",
                        "--define-expand-dim", "256", "--define-out-dim", "128")),
    ),
)

# -- Transformer-XL on WikiText-103 (Table 2a), models/transformer_xl.py (the settings of each
# row's architecture). Small: WikiText-2, 2 layers, d=64 (2 heads of 32), inner 256, memory 32,
# bands 2000/8000; n scaled by 1/6 (384 -> 64), k 4096 -> 512.
_TXL_SMALL = ("--decoder-layers", "2", "--decoder-embed-dim", "64", "--decoder-attention-heads", "2",
              "--decoder-head-dim", "32", "--decoder-ffn-embed-dim", "256", "--mem-len", "32",
              "--adaptive-cutoff", "2000,8000")
_TXL_N = {410: 64, 384: 64, 256: 48, 128: 24, 64: 12}


def _txl_small(n: int, define: bool = False) -> Tuple[str, ...]:
    return _TXL_SMALL + ("--define-map-dim", str(_TXL_N[n])) + (("--define-expand-dim", "512") if define else ())


# Table 2a's parameter split: the 1920-inner context model, the tied input-output layers at
# each n, and the DeFINE unit (N=3, k=4096, m=384) of every DeFINE row
_T2_CONTEXT = 36.25
_T2_IO = {384: 103.08, 256: 69.20, 128: 34.73, 64: 17.50}
_T2_DEFINE = 1.92
_T2 = (("standard_d384", "Standard, n=384", "define_txl_wt103_standard_d384", 384, False, 139.33, 26.10, 27.06),
       ("define_n384", "DeFINE, n=384", "define_txl_wt103_define_n384", 384, True, 141.25, 23.59, 24.17),
       ("projective_n256", "Projective, n=256", "define_txl_wt103_projective_n256", 256, False, 105.45, 27.18, 28.09),
       ("define_n256", "DeFINE, n=256", "define_txl_wt103_define_n256", 256, True, 107.37, 24.81, 25.72),
       ("projective_n128", "Projective, n=128", "define_txl_wt103_projective_n128", 128, False, 70.98, 28.06, 29.16),
       ("define_n128", "DeFINE, n=128", "define_txl_wt103_define_n128", 128, True, 72.90, 25.43, 26.33),
       ("projective_n64", "Projective, n=64", "define_txl_wt103_projective_n64", 64, False, 53.75, 32.94, 33.74),
       ("define_n64", "DeFINE, n=64", "define_txl_wt103_define_n64", 64, True, 55.67, 28.03, 29.10))
TABLE_2 = Table(
    "2", "Transformer-XL on WikiText-103 (Table 2a)", "lm", "wikitext-103", ("params", "valid_ppl", "test_ppl"),
    (Row("standard_d410", "Standard, n=d=410, inner 2100 (Dai et al.)", "define_txl_wt103_standard_d410",
         _ppl(151.11, None, 24.03, (0.0, 41.07, 110.04)), short="Standard d=410",
         small_args=_txl_small(410)[:-2] + ("--define-map-dim", "64", "--decoder-ffn-embed-dim", "280")),)
    + tuple(Row(i, label, arch, _ppl(p, v, t, (_T2_DEFINE if d else 0.0, _T2_CONTEXT, _T2_IO[n])),
                short="Standard d=384" if i == "standard_d384" else label.replace(",", ""),
                small_args=_txl_small(n, d))
            for i, label, arch, n, d, p, v, t in _T2),
)

# -- Compression (Table 5): Shu & Nakayama's 32 x 16 codes on three Table 2 models.
TABLE_5 = Table(
    "5", "Transformer-XL on WikiText-103 with and without compositional-code compression (Table 5)", "lm",
    "wikitext-103", ("table_mb", "test_ppl"),
    # the uncompressed rows are Table 2's models: their label and test perplexity are Table 2's
    tuple(
        Row(f"{src}{'_compressed' if comp else ''}",
            f"{TABLE_2.row(src).label}, {'32 x 16 codes' if comp else 'uncompressed'}", TABLE_2.row(src).arch,
            {"table_mb": mb, "test_ppl": ppl if comp else TABLE_2.row(src).paper["test_ppl"]},
            source=src, compressed=comp)
        for src, table_mb, codes_mb, codes_ppl in (("standard_d384", 411, 21, 27.36),
                                                   ("projective_n128", 127, 21, 29.82),
                                                   ("define_n128", 127, 21, 26.03))
        for comp, mb, ppl in ((False, table_mb, None), (True, codes_mb, codes_ppl))
    ),
)

# -- Transformer NMT on WMT14 EN-DE (Table 3), without checkpoint averaging in the paper.
# Small: 3+3 layers, d=128 (the tiny archs), trained on the EN-DE news proxy corpus.
_NMT_TINY = ("--encoder-embed-dim", "128", "--encoder-ffn-embed-dim", "512", "--encoder-layers", "3",
             "--encoder-attention-heads", "4", "--decoder-embed-dim", "128", "--decoder-ffn-embed-dim", "512",
             "--decoder-layers", "3", "--decoder-attention-heads", "4")
# Table 3's models have separate source and target vocabularies (OpenNMT, ~31K tokens each):
# at this size fairseq's transformer_wmt_en_de with its own tables and an untied output layer
# (44.14M context + 3 x 512 x 31,160) has the paper's 92M baseline total.
TABLE3_VOCAB = 31_160
TABLE_3 = Table(
    "3", "Transformer on WMT14 EN-DE, without checkpoint averaging (Table 3)", "nmt", "wmt14_en_de",
    ("params", "bleu_newstest2014", "bleu_newstest2017"),
    (
        Row("transformer", "Transformer", "transformer_wmt_en_de",
            {"params": 92.0, "bleu_newstest2014": 25.01, "bleu_newstest2017": 25.81},
            small_arch="transformer", small_args=_NMT_TINY),
        # Transformer base with the paper's NMT unit (models/define_transformer.py)
        Row("transformer_define", "Transformer + DeFINE", "define_transformer_wmt_en_de",
            {"params": 68.0, "bleu_newstest2014": 27.01, "bleu_newstest2017": 28.25},
            small_arch="define_transformer_tiny"),  # Table 3's output form by default
    ),
)

# -- fairseq's transformer_lm on WikiText-103 with DeFINE: not a table of the paper, whose
# abstract measures DeFINE against adaptive input. The adaptive row's numbers are Baevski &
# Auli's (2019; fairseq's transformer_lm_wiki103, 247M parameters, 18.7 test perplexity); the
# DeFINE and projective rows (Table 2's unit, N=3, k=4096, at n=128) have no published numbers.
# Small: WikiText-2's first 6,000 lines, 2 layers of d=64, bands 2000/8000, n=32, k=512.
# models/define_transformer_lm.py: the settings of each row's architecture.
_TLM_SMALL = ("--decoder-layers", "2", "--decoder-embed-dim", "64", "--decoder-attention-heads", "2",
              "--decoder-ffn-embed-dim", "256", "--adaptive-input-cutoff", "2000,8000")
TABLE_TLM = Table(
    "tlm", "fairseq transformer_lm on WikiText-103: adaptive input (Baevski & Auli 2019) and DeFINE (not in the paper)",
    "lm", "wikitext-103", ("params", "valid_ppl", "test_ppl"),
    (
        Row("adaptive", "Adaptive input, d=1024 (Baevski & Auli)", "transformer_lm_wiki103",
            _ppl(247.0, None, 18.7), small_args=_TLM_SMALL + ("--adaptive-softmax-cutoff", "2000,8000")),
        Row("projective_n128", "Adaptive input n=128, projective", "define_transformer_lm_wiki103_projective_n128",
            _ppl(None, None, None), small_args=_TLM_SMALL + ("--define-map-dim", "32")),
        Row("define_n128", "Adaptive input n=128 + DeFINE", "define_transformer_lm_wiki103_n128",
            _ppl(None, None, None), small_args=_TLM_SMALL + ("--define-map-dim", "32", "--define-expand-dim", "512")),
    ),
)

TABLES: Dict[str, Table] = {t.id: t for t in (TABLE_1A, TABLE_1C, TABLE_2, TABLE_3, TABLE_5, TABLE_6, TABLE_7, TABLE_8,
                                              TABLE_TLM)}


def find_table(table_id: str) -> Table:
    if table_id not in TABLES:
        raise UserError(f"unknown paper table {table_id!r}; use one of {', '.join(TABLES)} (e.g. --table 1a)")
    return TABLES[table_id]


def params_split(row: Row) -> Tuple[Optional[float], Optional[float], Optional[float], Optional[float]]:
    """The paper's (DeFINE, context model, input-output, total) parameters of an LM row, in
    millions; None where the paper gives no such number. A row that gives only its total and
    shares its context model and input-output layers with a Table 1a row (Tables 6-8) has
    the rest for DeFINE."""
    paper, total = row.paper, row.paper.get("params")
    if row.shared_with is None:
        return paper.get("define"), paper.get("context"), paper.get("input_output"), total
    shared = TABLE_1A.row(row.shared_with).paper
    context, io = shared["context"], shared["input_output"]
    return round(total - context - io, 2), context, io, total

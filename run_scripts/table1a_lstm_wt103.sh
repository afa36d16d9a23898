#!/usr/bin/env bash
# Table 1a: LSTM language model on WikiText-103, rows R1-R5 (standard, adaptive, adaptive +
# DeFINE with N = 3 / 7 / 11).
#
#   Command:   bash run_scripts/table1a_lstm_wt103.sh            (full scale, GPUs)
#              bash run_scripts/table1a_lstm_wt103.sh --small    (CPU check, ~6 minutes)
#   Hardware:  full: one GPU per row (R1: two in the paper), 20 epochs of 140 x 60 tokens,
#              about 1-2 days a row on a V100-class GPU. Small: 2 CPU cores, 300 updates a row
#              on the first 6,000 lines of WikiText-2 (--data-root), 2-layer LSTM of 256.
#   Paper:     fairseq-define-results paper --table 1a (also printed by --help).
#   Expected:  full: within about a point of the paper for R2-R5 (our DeFINE unit's count
#              differs: fairseq-define-params --paper-table 1a). Small: perplexities in the
#              hundreds; only the pipeline and the parameter columns are meaningful.
#   Output:    WORKDIR/results.md (ours beside the paper's), WORKDIR/valid_curves.png,
#              WORKDIR/<row>/{train.log,checkpoint_*.pt,result.json}.
set -euo pipefail
TABLE=1a SMALL_UPDATES=300 SMALL_MINUTES=4
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
parse_recipe_args "$@"
run_lm_table lstm_wt103

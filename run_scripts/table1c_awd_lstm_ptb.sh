#!/usr/bin/env bash
# Table 1c: AWD-LSTM on Penn Treebank without finetuning, with its standard 400-dim embedding
# and with DeFINE (n=128, k=1024, N=7, m=400; output tied at n=128).
#
#   Command:   bash run_scripts/table1c_awd_lstm_ptb.sh            (full scale, one GPU)
#              bash run_scripts/table1c_awd_lstm_ptb.sh --small    (CPU check, ~4 minutes)
#   Hardware:  full: one GPU, AWD-LSTM's recipe (NT-ASGD at lr 30, BPTT 70, batch 20, 500
#              epochs), about a day. Small: 2 CPU cores, 300 Adam updates a row of 20 x 35
#              tokens, 2 LSTM layers of 256, evaluated on the first 600 lines of valid/test.
#   Paper:     fairseq-define-results paper --table 1c (also printed by --help).
#   Expected:  full: AWD-LSTM near 60 / 58. With DeFINE, NT-ASGD's lr 30 needs the unit's
#              gradient scale (--define-unit-grad-scale, default 0.01; docs/stability.md),
#              without which the unit collapses. Small: pipeline check.
#   Output:    WORKDIR/results.md, WORKDIR/valid_curves.png, WORKDIR/<row>/.
set -euo pipefail
TABLE=1c SMALL_UPDATES=300 SMALL_MINUTES=4
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
parse_recipe_args "$@"
run_lm_table awd_ptb

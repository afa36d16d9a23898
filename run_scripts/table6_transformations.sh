#!/usr/bin/env bash
# Table 6: the transformation inside DeFINE (linear, GLT, GLT + shuffle, HGT, DeFINE without
# the mixer, DeFINE), LSTM language model on WikiText-103, N=7, n=m=384, k=1024.
#
#   Command:   bash run_scripts/table6_transformations.sh           (full scale, GPUs)
#              bash run_scripts/table6_transformations.sh --small   (CPU check, ~7 minutes)
#   Hardware:  full: one GPU per row, 20 epochs each (Table 1a's settings), 1-2 days a row.
#              Small: 2 CPU cores, 300 updates a row on WikiText-2's first 6,000 lines.
#   Paper:     fairseq-define-results paper --table 6 (also printed by --help).
#   Expected:  full: the paper's ordering (DeFINE < DeFINE w/o mixer < HGT ~ Linear < GLT).
#              Small: perplexities in the hundreds, a pipeline check; the parameter column
#              shows GLT's saving (our unit's schedule makes DeFINE larger than Linear here).
#   Output:    WORKDIR/results.md, WORKDIR/valid_curves.png, WORKDIR/<row>/.
set -euo pipefail
TABLE=6 SMALL_UPDATES=300 SMALL_MINUTES=4
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
parse_recipe_args "$@"
run_lm_table lstm_wt103

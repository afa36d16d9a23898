#!/usr/bin/env bash
# Table 8: (a) DeFINE's split+mix skip connection against residual connections (layers of
# width k/2); (b) the MER strategy with and without its Reduce step. LSTM language model on
# WikiText-103, N=7, n=384, k=1024.
#
#   Command:   bash run_scripts/table8_connections.sh           (full scale, GPUs)
#              bash run_scripts/table8_connections.sh --small   (CPU check, ~4 minutes)
#   Hardware:  full: one GPU per row, 20 epochs each (Table 1a's settings).
#              Small: 2 CPU cores, 300 updates a row on WikiText-2's first 6,000 lines.
#   Paper:     fairseq-define-results paper --table 8 (also printed by --help).
#   Expected:  full: DeFINE best, without Reduce close but larger. Small: pipeline check.
#   Output:    WORKDIR/results.md, WORKDIR/valid_curves.png, WORKDIR/<row>/.
set -euo pipefail
TABLE=8 SMALL_UPDATES=300 SMALL_MINUTES=4
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
parse_recipe_args "$@"
run_lm_table lstm_wt103

#!/usr/bin/env bash
# Table 7: depth N (3, 7, 11, with n=m=256, 384, 512) against width k (1024, 1536, 2048) of
# DeFINE, LSTM language model on WikiText-103.
#
#   Command:   bash run_scripts/table7_depth_width.sh           (full scale, GPUs)
#              bash run_scripts/table7_depth_width.sh --small   (CPU check, ~12 minutes)
#   Hardware:  full: one GPU per row, nine rows of 20 epochs (Table 1a's settings).
#              Small: 2 CPU cores, 300 updates a row on WikiText-2's first 6,000 lines.
#   Paper:     fairseq-define-results paper --table 7 (also printed by --help).
#   Expected:  full: deeper is better, wider is not. Small: only the pipeline and the
#              parameter columns are meaningful.
#   Output:    WORKDIR/results.md, WORKDIR/valid_curves.png, WORKDIR/<row>/.
set -euo pipefail
TABLE=7 SMALL_UPDATES=300 SMALL_MINUTES=4
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
parse_recipe_args "$@"
run_lm_table lstm_wt103

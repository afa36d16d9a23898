#!/usr/bin/env bash
# fairseq's transformer_lm on WikiText-103 (not a table of the paper): Baevski & Auli's
# adaptive-input model (--arch transformer_lm_wiki103: 16 layers, d 1024, adaptive input and
# softmax 20000/60000) against the same model with its adaptive input at n = 128 and the
# DeFINE unit (define_transformer_lm_wiki103_n128: Table 2's N=3, k=4096, m=1024) or the
# projective baseline at n = 128. fairseq's own recipe and evaluation for every row; the
# DeFINE rows change only --arch.
#
#   Command:   bash run_scripts/transformer_lm_wt103.sh            (full scale, GPUs)
#              bash run_scripts/transformer_lm_wt103.sh --small    (CPU check, ~6 minutes)
#   Hardware:  full: fairseq's recipe is for 8 GPUs (3072 tokens x update-freq 3 each; fewer
#              GPUs raise --update-freq to keep the batch), 286K updates a row: days a row
#              (not measured here). Small: 2 CPU cores, 300 updates a row of 16 x 64 tokens on
#              WikiText-2's first 6,000 lines, 2 layers of d=64, n=32.
#   Paper:     no DeFINE paper number: Baevski & Auli's transformer_lm_wiki103 has 247M
#              parameters and 18.7 test perplexity; DeFINE's Table 2 (Transformer-XL) puts
#              DeFINE 2.8 points below projective at n=128.
#   Expected:  full: not run here, no number claimed; the DeFINE row has 213M parameters
#              (fairseq-define-params --arch define_transformer_lm_wiki103_n128 --vocab-size
#              267735), 34M fewer than the adaptive model. Small: pipeline check (train,
#              fairseq-eval-lm with a context window, results table).
#   Output:    WORKDIR/results.md, WORKDIR/valid_curves.png, WORKDIR/<row>/.
set -euo pipefail
TABLE=tlm SMALL_UPDATES=300 SMALL_MINUTES=4
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
parse_recipe_args "$@"
run_lm_table tlm_wt103

"""Studies at CPU scale: does DeFINE pay off against its baselines at equal parameters?

One script a study (``python -m studies.<name> --help``; docs/studies.md):

    studies.nmt_multi30k   BLEU / chrF vs parameters, Multi30k EN-DE (Transformer)
    studies.lm_ptb         perplexity vs parameters, Penn Treebank (AWD-LSTM-style)
    studies.lm_wikitext2   perplexity vs parameters, WikiText-2 (Transformer-XL)

They train through the paper recipes' library (run_scripts/lib.sh) and record, tabulate and
plot through fairseq-define-results' functions (fairseq_define/tools/results.py).
"""

"""How translations are scored: sacreBLEU's BLEU and chrF with paired bootstrap tests, and perplexity.

``bleu.py`` scores files and translations (lowercased and cased BLEU, chrF) and compares two systems by paired
bootstrap resampling; ``perplexity.py`` scores reference translations by teacher forcing (per-token NLL, never smoothed, and
perplexity) for ``transformer evaluate`` and the trainer's validation alike.
"""

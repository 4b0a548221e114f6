"""The results side, in the order data flows: data/ (the results folder, records, manifests and
their types), analysis/ (statistics, summaries, effects, findings, the comparison of two runs),
render/ (one module per output; render/write.py runs them all). formatting.py is the one number
format the analysis's sentences and the renderers share."""

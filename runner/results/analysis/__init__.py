"""What the records say: statistics with the repeat as the unit, cell summaries, the machine's
conditions, effects, the same-answer check, findings, comparability and the comparison of two
runs. Plain data for the renderers; never imports one."""

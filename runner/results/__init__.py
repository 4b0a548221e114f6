"""The results side: the results folder (store), records, statistics, summaries, and one
module per output (terminal, markdown, html, files, plots, compare); write.write_reports runs
them all. Data flows one way: records → summaries → renderers."""

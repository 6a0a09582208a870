"""What shows an analysis; reads the analysis dict and computes no statistics. Owns: summary.py (the
verdict screen), report.py (the terminal's sections), markdown.py (report.md), figures.py
(analysis.png), sequential_figure.py (sequential.png), outputs.py (one analysis's files replaced
together or not at all)."""

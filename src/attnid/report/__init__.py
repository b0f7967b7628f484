"""Reporting: results -> LaTeX numbers, macros and tables, figure style, statistics over seeds.

`report.latex` (one number formatter, one macro namer, booktabs tables) and `report.macros`
(the paper's macro sets and the check that the paper cites exactly what is generated) need no
torch; `report.style` needs matplotlib; `report.seeds` pandas. Nothing here computes a result:
it only formats what the other layers measured.
"""

"""Reporting: results -> LaTeX numbers, macros and tables, figure style, statistics over seeds.

- `latex`: the one number formatter (`number`), the one macro namer (`macro_name`), booktabs tables;
- `macros`: the paper's macro sets (provenance, verification, training sweep) and the check that the
  paper cites exactly what is generated; `study`: the training study's macros;
- `tables`: table builders (counts, architectures, symmetry checks, training overlaps); `labels`: display
  names of the sweep's values and of spec labels; `config_doc`: config/README.md;
- `style`: the figure style and byte-stable saving (matplotlib); `seeds`: mean and band over seeds;
- `significance`: paired t-tests and Holm's correction for many cells.

Nothing here computes a result and nothing imports torch: it formats, and summarises over seeds, what the
other layers measured.
"""

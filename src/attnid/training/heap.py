"""Keep the trainer's large buffers in the process's heap, so that a step does not fault its memory in anew.

glibc's malloc serves a request above its mmap threshold (adaptive, at most 32 MiB on 64-bit systems) with a
fresh anonymous mapping and unmaps it when it is freed; it also hands the free top of its heap back to the
system once that passes M_TRIM_THRESHOLD. Either way the next request of that size touches pages that the
kernel must fault in and zero, one 4 KiB page at a time. A training step allocates and frees the same large
buffers every step (the logits (M, B, T, V), the runs' updates (M, P) and the optimizer's temporaries), so
that cost recurs on every step and is charged to the job as system time.

:func:`keep_buffers_on_heap` turns both off for the process: no mmap for any request (M_MMAP_MAX = 0) and
no trim (M_TRIM_THRESHOLD = -1). The freed buffers stay in the heap and are handed out again. The numbers do not
change; the process's peak memory stays reserved until it exits.

Measured on this 2-core machine, idle, one thread, 8 steps after 2 (`python benchmarks/heap.py --job text llama 1
--job text llama 16 --steps 8`; the same job with glibc's defaults in its own process first):

    text Llama H = 16, 60 runs   2,544 ms a step, 353k minor faults, 495 ms system  ->  2,248 ms, 11k, 111 ms
    text Llama H = 1, 60 runs    121 ms, 14k faults, 19 ms system  ->  105 ms, 1k, 2 ms

On a system without glibc (macOS, musl) it does nothing and returns False.
"""

from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_MAX = -4
TRIM_THRESHOLD = -1  # never trim (mallopt(3): "-1 disables trimming completely")


def keep_buffers_on_heap() -> bool:
    """Set glibc's malloc to serve every request from the heap and keep its free top (module docstring);
    True when both settings took."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))

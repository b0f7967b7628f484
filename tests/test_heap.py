"""attnid.training.heap: with the setting a freed large buffer is handed out again without page faults; without
it glibc maps and faults it in anew (each case in its own process: the setting is process-wide)."""

import json
import subprocess
import sys

import pytest

PROGRAM = """
import json, resource, sys
import torch
from attnid.training.heap import keep_buffers_on_heap
took = keep_buffers_on_heap() if sys.argv[1] == "1" else None
faults = []
for _ in range(6):  # a step's buffer: allocated, written, freed
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    torch.empty(2**23, dtype=torch.float64).fill_(1.0)  # 64 MiB: above glibc's largest mmap threshold
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"took": took, "faults": faults}))
"""
PAGES = 2**26 // 4096  # 4 KiB pages of the buffer


def faults(heap: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", PROGRAM, str(int(heap))], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc (Linux)")
def test_a_freed_large_buffer_is_reused_without_page_faults():
    kept = faults(heap=True)
    if not kept["took"]:
        pytest.skip("not glibc: keep_buffers_on_heap does nothing here")
    default = faults(heap=False)
    assert all(f > PAGES // 2 for f in default["faults"]), default  # mapped and faulted in every time
    assert kept["faults"][0] > PAGES // 2  # the first allocation grows the heap (glibc may grow it once more)
    assert all(f < PAGES // 20 for f in kept["faults"][3:]), kept  # then the freed buffers are handed out again

"""The torch-free layers import and work with torch made unimportable.

Each case runs in a fresh interpreter whose import system refuses `torch` (a meta-path finder
that raises ImportError), imports one module and computes something with it. A case fails if
anything on its import path needs torch; a module that does not exist yet is skipped.
"""

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

BLOCK_TORCH = """
import sys

class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError(f"torch is blocked in this interpreter ({name})")
        return None

sys.meta_path.insert(0, NoTorch())
"""

CASES = {
    "attnid": """
        import attnid
        assert attnid.count(attnid.AttentionSpec(16, 4)).unidentified == 4 * (16 + 16)  # GL(4) twice per head
        assert attnid.__version__
    """,
    "attnid.spec": """
        from attnid.spec import AttentionSpec
        spec = AttentionSpec(12, 4, 2, rope_dims="full", biases="qkvo", causal=True)
        assert AttentionSpec.from_row(spec.to_row()) == spec and spec.n_params > 0
    """,
    "attnid.counting": """
        from attnid.counting import count, min_seq_len, ratio_grid
        from attnid.spec import AttentionSpec
        assert count(AttentionSpec(4096, 32, rope_dims=128)).unidentified == 32 * (128 + 128**2)
        assert min_seq_len(AttentionSpec(8, 1, rope_dims=8, causal=True)) == 3
        assert len(ratio_grid(16, [1, 2, 4], [1, 2], ["none", "full"], ["none", "qkvo"])) > 0
    """,
    "attnid.symbolic": """
        from attnid.symbolic import check_against_counts, latex_table
        assert check_against_counts() == [] and "tabular" in latex_table()
    """,
    "attnid.architectures": """
        from attnid.architectures import architecture_table
        table = architecture_table()
        assert (table.unidentified > 0).all()
    """,
    "attnid.cli": """
        from attnid.cli import main
        assert main(["count", "--d-model", "8", "--heads", "2", "--rope", "full", "--json"]) == 0
    """,
    "attnid.training.runs": f"""
        import yaml
        from attnid.training.runs import jobs
        config = yaml.safe_load(open({str(ROOT / "config" / "config.yaml")!r}))
        assert len(jobs(config["training"])) > 0
    """,
    "attnid.report.latex": """
        from attnid.report.latex import macro_name, number
        assert macro_name("Unidentified", "LLaMA-2-70B") == "UnidentifiedLLaMATwoSevenZeroB"
        assert number(1234) == "1{,}234"
    """,
}


def module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


@pytest.mark.parametrize("module", list(CASES))
def test_imports_and_works_without_torch(module):
    if not module_exists(module):
        pytest.skip(f"{module} does not exist yet")
    code = BLOCK_TORCH + textwrap.dedent(CASES[module]) + "\nassert 'torch' not in sys.modules\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    assert out.returncode == 0, f"{module} needs torch or fails without it:\n{out.stderr[-3000:]}"


def test_the_blocker_blocks():
    """The harness itself: importing torch under it fails."""
    out = subprocess.run(
        [sys.executable, "-c", BLOCK_TORCH + "import torch"], capture_output=True, text=True, check=False
    )
    assert out.returncode != 0 and "torch is blocked" in out.stderr

"""The examples run as documented (each checks its own result and exits non-zero otherwise)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.slow  # a 4-rank training run (seconds): full suite only
def test_data_parallel_training_matches_full_batch() -> None:
    p = subprocess.run([sys.executable, "-m", "hcomm_kit", "launch", "--np", "3", "--", sys.executable,
                        str(EXAMPLES / "data_parallel_training.py")], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "3 ranks match full-batch gradient descent" in p.stdout


def test_every_example_runs_in_the_suite() -> None:
    """Each program and operator of examples/ is run by some test of the suite (this file, the
    documentation's, the torch and topology tests): a new example needs its test."""
    tests = Path(__file__).resolve().parent
    text = "\n".join(p.read_text() for p in tests.glob("test_*.py") if p.name != "test_examples.py")
    text += (tests / "test_examples.py").read_text().split("def test_every_example_runs_in_the_suite", 1)[0]
    examples = [p for p in sorted(EXAMPLES.iterdir()) if p.suffix == ".py" or (p / "op.toml").is_file()]
    assert len(examples) >= 5
    missing = [p.name for p in examples if f'"{p.name}"' not in text and f'"{p.stem}"' not in text]
    assert not missing, f"examples without a test that runs them: {missing}"

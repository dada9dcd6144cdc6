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

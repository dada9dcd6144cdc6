"""CANN's per-API, per-product dtype x reduce-op table (hcomm_kit.base.dtypes.HCCL_API_REDUCE): its facts,
the C header generated from it (the emulator's HCCL C API gate), and the gate of the built-ins.

The expected facts below are written out from CANN's pages independently of the table's helper
(hicann/hccl docs/zh/api_ref/comm_op_interface/<Api>.md, "dataType说明" / "op说明").
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from hcomm_kit.base import dtypes as D
from hcomm_kit.base.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
HEADER = ROOT / "hcomm_kit" / "emu" / "src" / "hccl" / "hccl_api_support.h"
A2A3 = {"int8", "int16", "int32", "int64", "fp16", "fp32", "bf16"}


def test_generated_c_header_is_current() -> None:
    """The emulator's C gate is the Python table: the checked-in header equals its rendering."""
    assert HEADER.read_text() == D.render_c_header(), (
        f"{HEADER} is stale: run python -m hcomm_kit.base.dtypes --c-header > {HEADER.relative_to(ROOT)}")
    out = subprocess.run([sys.executable, "-m", "hcomm_kit.base.dtypes", "--c-header"], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    assert out == HEADER.read_text()


def test_c_header_masks_decode_to_the_table() -> None:
    rows = re.findall(r'\{"(Hccl\w+)", "(\w+)", \{(0x[0-9a-f]+)u, (0x[0-9a-f]+)u, (0x[0-9a-f]+)u, (0x[0-9a-f]+)u\}\}',
                      HEADER.read_text())
    assert len(rows) == 4 * 3
    for api, product, *masks in rows:
        for op, mask in zip(("sum", "prod", "max", "min"), masks):
            names = {d.name for d in D.DTYPES if int(mask, 16) >> d.value & 1}
            assert names == set(D.HCCL_API_REDUCE[api][product].get(op, ())), (api, product, op)


@pytest.mark.parametrize("api", ["HcclAllReduce", "HcclReduce", "HcclReduceScatter"])
def test_pages_allreduce_reduce_reducescatter(api: str) -> None:
    for product, dts in (("Ascend910B", A2A3), ("Ascend910_93", A2A3), ("Ascend950", A2A3 | {"uint64", "fp64"})):
        for d in D.DTYPES:
            for op in ("sum", "prod", "max", "min"):
                want = d.name in dts and not (op == "prod" and d.name in ("int16", "bf16"))
                assert D.hccl_api_reduces(api, product, d.name, op) == want, (api, product, d.name, op)


def test_pages_reducescatterv() -> None:
    for d in D.DTYPES:
        for op in ("sum", "prod", "max", "min"):
            a3 = d.name in A2A3 and op != "prod"
            assert D.hccl_api_reduces("HcclReduceScatterV", "Ascend910B", d.name, op) == (a3 and d.name != "int64")
            assert D.hccl_api_reduces("HcclReduceScatterV", "Ascend910_93", d.name, op) == a3
            assert D.hccl_api_reduces("HcclReduceScatterV", "Ascend950", d.name, op) == (
                d.name in A2A3 and not (op == "prod" and d.name in ("int16", "bf16")))
    for api, per in D.HCCL_API_MOVE.items():
        assert all(v == {d.name for d in D.DTYPES} for v in per.values()), api


def test_refusal_names_api_dtype_op_and_product() -> None:
    with pytest.raises(ConfigError, match="HcclReduceScatterV does not reduce int64 with sum on Ascend910B") as e:
        D.check_hccl_api_reduce("HcclReduceScatterV", "Ascend910B", "int64", "sum")
    assert e.value.key == "dtype"
    with pytest.raises(ConfigError, match="HcclAllReduce does not reduce bf16 with prod on Ascend950") as e:
        D.check_hccl_api_reduce("HcclAllReduce", "Ascend950", "bf16", "prod")
    assert e.value.key == "reduce_op"
    with pytest.raises(ConfigError, match="unknown product"):
        D.hccl_api_reduces("HcclAllReduce", "Ascend310P", "fp32", "sum")

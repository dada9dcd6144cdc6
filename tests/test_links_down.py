"""Operators with a link taken down (HCOMM_KIT_LINKS_DOWN): whatever needs the downed link fails on
every rank within seconds, naming the link and the variable; nothing waits for a timeout because a
peer already failed. (HCCL's C API over a downed link: tests/test_hccl_coll.py.)

* A ring in rank order (op.toml ``ring_order = "rank"``) cannot route around a link between ring
  neighbours: every rank refuses it before anything is acquired or launched (it failed in the
  kernel's own check, "missing ring channel", or with "channel handle is 0", naming neither the link
  nor the variable); the scaffold's ``ring_order = "avoid-down"`` lays the ring around it and runs.
* A mesh operator gets no channel over the link (channels[peer].handle == 0) and may route around
  it; the scaffolded mesh allgather does not, and its kernel's failure names the link on every rank.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from hcomm_kit.base.errors import AclError, ConfigError, HcclError
from test_orchestrator import scaffold

LINK = "HCCS link between rank 0 and rank 1"


@pytest.mark.mpi(np=4, topology="A2:1x4", links_down="0-1", timeout=300)
def test_ring_operator_needing_a_downed_link_fails_on_every_rank(comm) -> None:
    op = comm.load_op(scaffold("ring-allreduce", name="t_ring_rank_order",
                               toml_edit=(('ring_order = "avoid-down"', 'ring_order = "rank"'),)))
    x = np.arange(1001, dtype=np.float32) + comm.rank
    t0 = time.monotonic()
    with pytest.raises(ConfigError) as info:
        op(x)
    assert time.monotonic() - t0 < 10
    msg = str(info.value)
    assert "link 0-1" in msg and "HCOMM_KIT_LINKS_DOWN=0-1" in msg and 'ring_order = \"avoid-down\"' in msg, msg
    assert "channel handle is 0" not in msg and "missing ring channel" not in msg, msg
    # refused before the call was posted: the communicator stays usable, and the scaffold's own ring
    # (ring_order = "avoid-down") goes around the link
    y = comm.load_op(scaffold("ring-allreduce"))(x)
    np.testing.assert_array_equal(y, sum(np.arange(1001, dtype=np.float32) + r for r in range(comm.size)))


@pytest.mark.mpi(np=4, topology="A2:1x4", links_down="0-1", timeout=300)
def test_mesh_operator_that_does_not_route_around_fails_naming_the_link(comm) -> None:
    op = comm.load_op(scaffold("mesh-allgather"))
    t0 = time.monotonic()
    with pytest.raises((AclError, HcclError)) as info:  # a rank still making its channels: HcclError
        op(np.arange(37, dtype=np.int32) + comm.rank)
    assert time.monotonic() - t0 < 10
    msg = str(info.value)
    # ranks 0 and 1 find no channel to each other; ranks 2 and 3 learn it from the abort
    assert "has no channel to rank(s)" in msg and "HCOMM_KIT_LINKS_DOWN=0-1" in msg, msg

"""Training on the ``hcomm`` backend: DDP (default reduction, ``allreduce_hook``, ``op_hook`` with a
scaffolded ring-allreduce) and FSDP2 (``fully_shard``) end with the parameters of single-process
full-batch training (float tolerance), at 2 and 4 ranks, in one mpirun job per rank count.

The models and the training loop are the examples' (examples/train_ddp.py, train_fsdp.py), so
the examples are exercised as well.
"""

from __future__ import annotations

import datetime
import importlib.util
import shutil
import tempfile
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from hcomm_kit.core.bootstrap import under_mpi


pytestmark = pytest.mark.slow  # the quick run has one torch smoke test (test_torch_pg.py)
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
STEPS, BATCH, WIDTH, LR = 6, 48, 64, 0.05  # batch divisible by 2, 3, 4


def _example(name: str):
    spec = importlib.util.spec_from_file_location(f"hk_example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def world():
    """The default "hcomm" group of this rank; None in the outer pytest process."""
    if not under_mpi():
        yield None
        return
    from mpi4py import MPI  # noqa: F401 - MPI up on every rank: a failing rank's MPI_Abort then ends the job
    import hcomm_kit.torch  # noqa: F401 - registers "hcomm", env:// variables from mpirun

    dist.init_process_group("hcomm", timeout=datetime.timedelta(seconds=120))
    yield dist.group.WORLD
    dist.destroy_process_group()


def _assert_matches_reference(ex, params, rank: int) -> None:
    ref = ex.make_model(WIDTH)
    ex.train(ref, STEPS, BATCH, 0, 1, LR)
    for (name, want), got in zip(ref.named_parameters(), params):
        torch.testing.assert_close(got, want.detach(), rtol=1e-5, atol=1e-6, msg=f"rank {rank}: parameter {name}")


@pytest.mark.mpi(np=[2, 4], timeout=240)
def test_ddp_matches_single_process(world) -> None:
    import hcomm_kit.torch
    from hcomm_kit.scaffold.render import new_op
    from torch.nn.parallel import DistributedDataParallel as DDP

    ex = _example("train_ddp")
    r, n = dist.get_rank(), dist.get_world_size()
    path = [tempfile.mkdtemp(prefix="hk_torch_op_") if r == 0 else None]
    if r == 0:
        new_op("ddp_test_ring", pattern="ring-allreduce", directory=path[0])
    dist.broadcast_object_list(path, src=0)
    try:
        for hook in ("none", "allreduce", "op"):
            model = DDP(ex.make_model(WIDTH), bucket_cap_mb=0.01)  # several buckets
            if hook == "allreduce":
                model.register_comm_hook(None, hcomm_kit.torch.allreduce_hook)
            elif hook == "op":
                model.register_comm_hook(None, hcomm_kit.torch.op_hook(Path(path[0]) / "ddp_test_ring"))
            ex.train(model, STEPS, BATCH, r, n, LR)
            _assert_matches_reference(ex, [p.detach() for p in model.module.parameters()], r)
    finally:
        dist.barrier()
        if r == 0:
            shutil.rmtree(path[0], ignore_errors=True)


@pytest.mark.mpi(np=[2, 4], timeout=240)
def test_fsdp2_matches_single_process(world) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    ex = _example("train_fsdp")
    r, n = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (n,))
    model = ex.make_model(WIDTH)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    assert dist.get_backend(mesh.get_group()) == "hcomm"
    ex.train(model, STEPS, BATCH, r, n, LR)
    _assert_matches_reference(ex, [p.full_tensor() for p in model.parameters()], r)


@pytest.mark.mpi(np=[2], timeout=240)
def test_op_hook_refuses_a_non_allreduce_operator(world, tmp_path) -> None:
    import hcomm_kit.torch
    from hcomm_kit.base.errors import ConfigError
    from hcomm_kit.scaffold.render import new_op

    opdir = new_op("not_an_allreduce", pattern="mesh-allgather", directory=tmp_path).opdir
    with pytest.raises(ConfigError, match="output"):
        hcomm_kit.torch.op_hook(opdir)
    gloo = dist.new_group(backend="gloo")
    with pytest.raises(TypeError, match="hcomm"):
        hcomm_kit.torch.allreduce_hook(gloo, None)

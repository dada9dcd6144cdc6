"""Train a small model with DistributedDataParallel on the ``hcomm`` backend (CPU, synthetic data).

    torchrun --standalone --nproc-per-node 2 examples/train_ddp.py
    hcomm-kit launch --np 2 -- python examples/train_ddp.py

The script is an ordinary gloo-style DDP script with the backend name changed to "hcomm".
Options: ``--backend gloo`` (the same run on gloo), ``--hook allreduce`` (DDP comm hook
``hcomm_kit.torch.allreduce_hook``), ``--hook op`` (the gradient reduction is a custom operator:
``--op DIR``, default a ring-allreduce scaffolded by ``hcomm-kit new --pattern ring-allreduce``),
``--check`` (every rank compares its parameters with single-process full-batch training and
exits non-zero if they differ).

Each step draws a global batch of ``--batch`` samples (the same on every rank); rank r trains on
its 1/N slice. DDP averages the gradients, so the parameters follow full-batch SGD.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import hcomm_kit.torch  # registers "hcomm" (done automatically when hcomm-kit is installed)

IN, OUT = 32, 8


def make_model(width: int) -> torch.nn.Module:
    torch.manual_seed(0)  # the same initial parameters everywhere (DDP broadcasts rank 0's anyway)
    return torch.nn.Sequential(torch.nn.Linear(IN, width), torch.nn.Tanh(), torch.nn.Linear(width, width),
                               torch.nn.Tanh(), torch.nn.Linear(width, OUT))


def batch(step: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(size, IN, generator=g)
    return x, torch.sin(x[:, :OUT]) + 0.1 * torch.randn(size, OUT, generator=g)


def train(model: torch.nn.Module, steps: int, global_batch: int, rank: int, world: int, lr: float,
          times: list[float] | None = None) -> list[float]:
    """SGD on rank ``rank``'s slice of each global batch; returns the losses (step times in ``times``)."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    per = global_batch // world
    for step in range(steps):
        t0 = time.perf_counter()
        x, y = batch(step, global_batch)
        x, y = x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if times is not None:
            times.append(time.perf_counter() - t0)
    return losses


def scaffold_op(rank: int) -> str:
    """Rank 0 scaffolds a ring-allreduce operator; every rank gets its directory."""
    path = [None]
    if rank == 0:
        from hcomm_kit.scaffold.render import new_op

        path[0] = str(new_op("ddp_ring_allreduce", pattern="ring-allreduce",
                             directory=tempfile.mkdtemp(prefix="hcomm_kit_ddp_")).opdir)
    dist.broadcast_object_list(path, src=0)
    return path[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="hcomm")
    ap.add_argument("--hook", choices=["none", "allreduce", "op"], default="none")
    ap.add_argument("--op", default=None, metavar="DIR", help="custom operator directory for --hook op")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64, help="global batch (split over the ranks)")
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--check", action="store_true", help="compare with single-process full-batch training")
    args = ap.parse_args()

    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch % world:
        raise SystemExit(f"--batch {args.batch} must be divisible by the {world} ranks")
    model = DDP(make_model(args.width))
    scaffolded = None
    if args.hook == "allreduce":
        model.register_comm_hook(None, hcomm_kit.torch.allreduce_hook)
    elif args.hook == "op":
        opdir = args.op or scaffold_op(rank)
        scaffolded = None if args.op else opdir
        model.register_comm_hook(None, hcomm_kit.torch.op_hook(opdir))
    times: list[float] = []
    losses = train(model, args.steps, args.batch, rank, world, args.lr, times)
    if rank == 0:
        steady = times[1:] or times  # the first step also loads the operators
        print(f"{args.backend} ({args.hook} hook), {world} ranks: loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
              f"{1000 * sum(steady) / len(steady):.2f} ms/step after the first", flush=True)
    status = 0
    if args.check:
        ref = make_model(args.width)
        train(ref, args.steps, args.batch, 0, 1, args.lr)
        diffs = [(p - q).abs().max().item() for p, q in zip(model.module.parameters(), ref.parameters())]
        ok = all(torch.allclose(p, q, rtol=1e-5, atol=1e-6) for p, q in zip(model.module.parameters(),
                                                                              ref.parameters()))
        print(f"rank {rank}: parameters {'match' if ok else 'DIFFER FROM'} single-process full-batch training "
              f"(max abs difference {max(diffs):.2e})", flush=True)
        status = 0 if ok else 1
    dist.barrier()
    if scaffolded and rank == 0:
        shutil.rmtree(os.path.dirname(scaffolded), ignore_errors=True)
    dist.destroy_process_group()
    return status


if __name__ == "__main__":
    raise SystemExit(main())

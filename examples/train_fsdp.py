"""Train a small model with FSDP2 (``fully_shard``) on the ``hcomm`` backend (CPU, synthetic data).

    torchrun --standalone --nproc-per-node 2 examples/train_fsdp.py
    hcomm-kit launch --np 2 -- python examples/train_fsdp.py

An ordinary gloo-style FSDP2 script with the backend name changed to "hcomm": every Linear layer
and the root module are sharded over a 1-D CPU device mesh; parameters are all-gathered
(``all_gather_single``) before use and gradients reduce-scattered (``reduce_scatter_single``,
AVG). ``--backend gloo`` runs the same on gloo; ``--check`` makes every rank compare the full
parameters with single-process full-batch training and exit non-zero if they differ.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

import hcomm_kit.torch  # noqa: F401 - registers "hcomm" (done automatically when hcomm-kit is installed)

IN, OUT = 32, 8


def make_model(width: int) -> torch.nn.Module:
    torch.manual_seed(0)
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
    per = global_batch // world
    losses = []
    for step in range(steps):
        t0 = time.perf_counter()
        x, y = batch(step, global_batch)
        loss = torch.nn.functional.mse_loss(model(x[rank * per:(rank + 1) * per]), y[rank * per:(rank + 1) * per])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if times is not None:
            times.append(time.perf_counter() - t0)
    return losses


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="hcomm")
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
    mesh = init_device_mesh("cpu", (world,))
    model = make_model(args.width)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    times: list[float] = []
    losses = train(model, args.steps, args.batch, rank, world, args.lr, times)
    if rank == 0:
        steady = times[1:] or times
        print(f"{args.backend} FSDP2, {world} ranks: loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
              f"{1000 * sum(steady) / len(steady):.2f} ms/step after the first", flush=True)
    status = 0
    if args.check:
        full = [p.full_tensor() for p in model.parameters()]  # collective: every rank gathers
        ref = make_model(args.width)
        train(ref, args.steps, args.batch, 0, 1, args.lr)
        diffs = [(p - q).abs().max().item() for p, q in zip(full, ref.parameters())]
        ok = all(torch.allclose(p, q, rtol=1e-5, atol=1e-6) for p, q in zip(full, ref.parameters()))
        print(f"rank {rank}: parameters {'match' if ok else 'DIFFER FROM'} single-process full-batch training "
              f"(max abs difference {max(diffs):.2e})", flush=True)
        status = 0 if ok else 1
    dist.destroy_process_group()
    return status


if __name__ == "__main__":
    raise SystemExit(main())

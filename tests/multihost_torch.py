"""The torch rank program of the multi-host tests: `hcomm` process group, all-reduce and all-gather of
tensors against numpy; prints ``MHT-OK <rank> <size>``. Started by `hcomm-kit launch --nnodes` (the
launcher exports the torch environment: job rank, world size, node 0's MASTER_ADDR)."""

from __future__ import annotations

import os

import numpy as np
import torch
import torch.distributed as dist

import hcomm_kit.torch  # noqa: F401  (registers the "hcomm" backend)


def main() -> None:
    dist.init_process_group("hcomm")
    r, n = dist.get_rank(), dist.get_world_size()
    x = torch.arange(1003, dtype=torch.float32) + r
    dist.all_reduce(x)
    ref = sum(np.arange(1003, dtype=np.float32) + k for k in range(n))
    np.testing.assert_array_equal(x.numpy(), ref)
    parts = [torch.empty(5, dtype=torch.int32) for _ in range(n)]
    dist.all_gather(parts, torch.full((5,), r, dtype=torch.int32))
    np.testing.assert_array_equal(torch.cat(parts).numpy(), np.repeat(np.arange(n, dtype=np.int32), 5))
    dist.barrier()
    # one write of the whole line: the ranks of a host share torchrun's stdout, and an unbuffered
    # print writes the text and its newline apart (another rank's line can come between them)
    os.write(1, f"MHT-OK {r} {n}\n".encode())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""Call a custom operator from a Python program on N ranks.

    hcomm-kit new my_allreduce --pattern ring-allreduce --dir /tmp/ops
    hcomm-kit launch --np 4 -- python examples/custom_allreduce.py /tmp/ops/my_allreduce

Every rank contributes rank+1; the sum over N ranks is N(N+1)/2 everywhere.
"""

import sys

import numpy as np

import hcomm_kit
from hcomm_kit.ops import reference


def main(opdir: str) -> None:
    with hcomm_kit.init() as comm:                      # bootstraps from mpirun (mpi4py)
        op = comm.load_op(opdir)                        # builds (cached), loads, acquires resources
        x = np.full(1000, comm.rank + 1, dtype=np.float32)
        y = op(x, reduce_op="sum")                      # numpy in, numpy out
        expect = reference.allreduce([np.full(1000, r + 1, np.float32) for r in range(comm.size)])[comm.rank]
        np.testing.assert_array_equal(y, expect)

        work = op(x, async_op=True)                     # asynchronous: a Work handle
        y2 = work.wait()

        dx = comm.to_device(x)                          # device buffers: no host copies per call
        dy = comm.empty(1000, "fp32")
        op(dx, dy)
        assert (dy.numpy() == y2).all()
        if comm.rank == 0:
            print(f"{op.name} on {comm.size} ranks: {y[:4]} ... OK")


if __name__ == "__main__":
    main(sys.argv[1])

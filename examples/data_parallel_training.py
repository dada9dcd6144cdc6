"""Data-parallel training with the built-in collectives (numpy, and PyTorch when installed).

    hcomm-kit launch --np 4 -- python examples/data_parallel_training.py

Each rank holds a shard of a synthetic regression data set (fp32: Ascend910B reduces fp32, not fp64). Every step computes the local
gradient, averages it across ranks with ``comm.all_reduce(grad, "avg")`` (in place), and applies
it; the initial weights come from rank 0 by ``broadcast``. Because the shards together are the
whole data set and the average is exact, the weights match single-process full-batch gradient
descent, which rank 0 checks at the end. With PyTorch installed, the same loop runs on CPU
tensors (shared with numpy through DLPack / ``.numpy()``).
"""

from __future__ import annotations

import numpy as np

import hcomm_kit

FEATURES, SAMPLES, STEPS, LR = 16, 4096, 8, 0.05   # few steps: compared mid-trajectory, not at the optimum


def dataset() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((SAMPLES, FEATURES)).astype(np.float32)
    w_true = rng.standard_normal(FEATURES).astype(np.float32)
    return x, (x @ w_true + 0.01 * rng.standard_normal(SAMPLES)).astype(np.float32)


def grad(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Gradient of the mean squared error over (x, y)."""
    return (np.float32(2.0) * x.T @ (x @ w - y) / np.float32(len(y))).astype(np.float32)


def train_numpy(comm) -> np.ndarray:
    x, y = dataset()
    shard = slice(comm.rank * SAMPLES // comm.size, (comm.rank + 1) * SAMPLES // comm.size)
    xs, ys = x[shard], y[shard]
    w = np.random.default_rng(100 + comm.rank).standard_normal(FEATURES).astype(np.float32)
    comm.broadcast(w, root=0, out=w)                # every rank starts from rank 0's weights
    for _ in range(STEPS):
        g = grad(w, xs, ys) * np.float32(len(ys) * comm.size / SAMPLES)  # shard weight: avg = full-batch gradient
        comm.all_reduce(g, "avg", out=g)
        w -= LR * g
    return w


def train_torch(comm) -> np.ndarray | None:
    try:
        import torch
    except ImportError:
        return None
    x, y = dataset()
    shard = slice(comm.rank * SAMPLES // comm.size, (comm.rank + 1) * SAMPLES // comm.size)
    xs, ys = torch.from_numpy(x[shard]), torch.from_numpy(y[shard])
    model = torch.nn.Linear(FEATURES, 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.from_numpy(comm.broadcast(model.weight.detach().numpy(), root=0)))
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for _ in range(STEPS):
        opt.zero_grad()
        loss = ((model(xs).squeeze(1) - ys) ** 2).sum() / SAMPLES * comm.size
        loss.backward()
        g = model.weight.grad.numpy()               # shares memory with the tensor
        comm.all_reduce(g, "avg", out=g)            # averaged in place, seen by the optimizer
        opt.step()
    return model.weight.detach().numpy().ravel()


def main() -> None:
    with hcomm_kit.init() as comm:
        w = train_numpy(comm)
        if comm.rank == 0:
            x, y = dataset()
            w_ref = np.random.default_rng(100).standard_normal(FEATURES).astype(np.float32)
            for _ in range(STEPS):
                w_ref -= LR * grad(w_ref, x, y)
            np.testing.assert_allclose(w, w_ref, rtol=1e-4, atol=1e-5)      # fp32: only the rounding differs
            print(f"numpy: {comm.size} ranks match full-batch gradient descent "
                  f"(max |dw| = {np.max(np.abs(w - w_ref)):.2e})")
        wt = train_torch(comm)
        if comm.rank == 0:
            print("torch: not installed, skipped" if wt is None else
                  f"torch: weights after {STEPS} steps, |w| = {np.linalg.norm(wt):.4f}")


if __name__ == "__main__":
    main()

"""The reductions of the ``hcomm`` backend (allreduce, reduce, reduce-scatter), as a mixin of
:class:`~hcomm_kit.torch.process_group.ProcessGroupHcomm`.

torch's reduce ops map onto the kernels' SUM / PRODUCT / MIN / MAX: AVG is a SUM divided on the host
after the kernel, PREMUL_SUM a SUM of the inputs multiplied first. Each product's (CANN API, dtype,
op) limits are checked before anything is enqueued, as CANN refuses them.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch._C import _distributed_c10d as _c10d
from torch.distributed import ReduceOp

from ..base.dtypes import hccl_api_reduce_summary, hccl_api_reduces
from ..base.errors import ConfigError
from ._options import _RedOp, options
from ._tensors import hk_dtype
from .work import HcommWork, _Stage

# torch reduce op -> (name in messages, op the kernel applies)
_REDUCE = {
    _RedOp.SUM: ("SUM", "sum"),
    _RedOp.AVG: ("AVG", "sum"),
    _RedOp.PRODUCT: ("PRODUCT", "prod"),
    _RedOp.MIN: ("MIN", "min"),
    _RedOp.MAX: ("MAX", "max"),
    _RedOp.PREMUL_SUM: ("PREMUL_SUM", "sum"),
}


class _Reductions:
    """allreduce, reduce, reduce_scatter and their variants; uses the group's plumbing
    (``_submit``, ``_chain_pairs``, ``_args``, ``_check_blocks``, ``_one``, ``_check_cpu``, ``_root``, ``_timeout``, ``_scratch``,
    ``_product``)."""

    def _reduce_op(self, op: Any, dtype: torch.dtype, what: str) -> tuple[str, str, Any]:
        """(torch name, kernel op, PREMUL_SUM factor or None); checks the product's limits."""
        if isinstance(op, ReduceOp):
            kind = op.op
        elif isinstance(op, _RedOp):
            kind = op
        else:
            raise TypeError(f"hcomm: {what}: {op!r} is not a torch.distributed.ReduceOp")
        entry = _REDUCE.get(kind)
        if entry is None:
            raise NotImplementedError(f"hcomm: {what} with ReduceOp.{kind.name} is not supported (HCCL reduces "
                                      f"with SUM, PRODUCT, MIN, MAX; AVG and PREMUL_SUM are built on SUM)")
        name, kernel_op = entry
        factor = op.factor if kind == _RedOp.PREMUL_SUM else None
        if dtype == torch.bool:
            raise TypeError(f"hcomm: {what} with ReduceOp.{name} cannot reduce torch.bool tensors; "
                            f"cast to torch.uint8 / torch.int32")
        dt = hk_dtype(dtype, what)
        api = ("HcclAllReduce" if what.startswith("allreduce") else
               "HcclReduceScatter" if what.startswith("reduce_scatter") else "HcclReduce")
        if not hccl_api_reduces(api, self._product, dt, kernel_op):
            raise ConfigError(
                f"hcomm: {what} with ReduceOp.{name} on {dtype} ({dt.name}): CANN's {api} does not reduce {dt.name} "
                f"with {kernel_op} on {self._product} (it accepts {hccl_api_reduce_summary(api, self._product)}); "
                f"cast the tensor", key="dtype")
        if kind == _RedOp.PREMUL_SUM and not dt.is_float:
            raise TypeError(f"hcomm: {what} with ReduceOp.PREMUL_SUM needs a floating-point tensor, got {dtype}")
        return name, kernel_op, factor

    def _finish_reduce(self, name: str, out: torch.Tensor) -> None:
        """AVG: the SUM divided by the rank count (floats in their dtype, integers toward zero)."""
        if name != "AVG":
            return
        n = self.size()
        if out.is_floating_point():
            out.div_(n)
        else:
            out.copy_(torch.div(out, n, rounding_mode="trunc"))

    @staticmethod
    def _premul(x: torch.Tensor, factor: Any, *, inplace: bool = False) -> torch.Tensor:
        """PREMUL_SUM's multiplication: ``x * factor`` (a number or a tensor), new or in place."""
        f = factor.to(dtype=x.dtype, device=x.device) if isinstance(factor, torch.Tensor) else factor
        return x.mul_(f) if inplace else x * f

    # ---- allreduce, reduce ---------------------------------------------------------------------
    def allreduce(self, tensors: Any, opts: Any = None) -> HcommWork:
        """Element-wise reduction over the ranks, in place (``opts.reduceOp``: SUM, AVG, MAX, MIN,
        PRODUCT, PREMUL_SUM)."""
        opts, t, tmo = self._args("allreduce", tensors, opts, _c10d.AllreduceOptions, "reduceOp")
        name, kop, factor = self._reduce_op(opts.reduceOp, t.dtype, "allreduce")
        dt = hk_dtype(t.dtype, "allreduce")
        comm = self.comm

        def run(st: _Stage) -> None:
            o = st.ops
            x = o.contiguous(t, write=True)
            if factor is not None:
                self._premul(x, factor, inplace=True)
            if x.numel():
                b = o.operand(x, dt)
                st.works.append(comm.all_reduce(b, kop, out=b, dtype=dt, timeout=tmo, async_op=True))
            st.after.append(lambda: self._finish_reduce(name, x))
        return self._submit("allreduce", [t], run)

    def allreduce_coalesced(self, tensors: Sequence[torch.Tensor], opts: Any = None) -> HcommWork:
        """Allreduce of several tensors as one flat buffer per dtype."""
        opts = options(opts, _c10d.AllreduceCoalescedOptions, "reduceOp")
        tensors = list(tensors)
        self._check_cpu("allreduce_coalesced", *tensors)
        checked = {t.dtype: self._reduce_op(opts.reduceOp, t.dtype, "allreduce_coalesced") for t in tensors}
        tmo = self._timeout(opts)
        comm = self.comm

        def unflatten(name: str, flat: torch.Tensor, group: list[torch.Tensor]) -> None:
            self._finish_reduce(name, flat)
            self._split_into(flat, group)

        def run(st: _Stage) -> None:
            for dtype, (name, kop, factor) in checked.items():
                group = [t for t in tensors if t.dtype == dtype]
                flat = torch.cat([t.detach().reshape(-1) for t in group]) if group else None
                if flat is None or not flat.numel():
                    continue
                if factor is not None:
                    self._premul(flat, factor, inplace=True)
                dt = hk_dtype(dtype, "allreduce_coalesced")
                b = st.ops.operand(flat, dt)
                st.works.append(comm.all_reduce(b, kop, out=b, dtype=dt, timeout=tmo, async_op=True))
                st.after.append(lambda name=name, flat=flat, group=group: unflatten(name, flat, group))
        return self._submit("allreduce_coalesced", tensors, run)

    def reduce(self, tensors: Any, opts: Any = None) -> HcommWork:
        """The root (``opts.rootRank``) gets the reduction in place; other ranks' tensors are unchanged."""
        opts, t, tmo = self._args("reduce", tensors, opts, _c10d.ReduceOptions, "reduceOp")
        root = self._root(opts.rootRank, "reduce")
        name, kop, factor = self._reduce_op(opts.reduceOp, t.dtype, "reduce")
        dt = hk_dtype(t.dtype, "reduce")
        comm = self.comm
        mine = self.rank() == root

        def run(st: _Stage) -> None:
            o = st.ops
            x = o.contiguous(t, write=mine)
            src = self._premul(x, factor) if factor is not None else x
            if x.numel():
                if mine:
                    b = o.operand(src, dt)
                    out = o.operand(x, dt) if src is not x else b
                    st.works.append(comm.reduce(b, root, kop, out=out, dtype=dt, timeout=tmo, async_op=True))
                else:
                    st.works.append(comm.reduce(o.operand(src, dt), root, kop, dtype=dt, timeout=tmo,
                                                async_op=True))
            if mine:
                st.after.append(lambda: self._finish_reduce(name, x))
        return self._submit("reduce", [t], run)

    # ---- reduce-scatter ------------------------------------------------------------------------
    def reduce_scatter_single(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None, *,
                              _scratch: torch.Tensor | None = None) -> HcommWork:
        """Reduce ``input`` (``size`` blocks of ``output.numel()``) over the ranks; rank r gets block r.
        (``_scratch``: ``input`` is a staging tensor of :meth:`_scratch`, given back when done.)"""
        opts = options(opts, _c10d.ReduceScatterOptions, "reduceOp")
        self._check_blocks("reduce_scatter_single", output, input, "input")
        name, kop, factor = self._reduce_op(opts.reduceOp, input.dtype, "reduce_scatter_single")
        dt = hk_dtype(input.dtype, "reduce_scatter_single")
        tmo = self._timeout(opts)
        comm = self.comm

        def run(st: _Stage) -> None:
            o = st.ops
            x = o.contiguous(input, write=False)
            if factor is not None:
                x = self._premul(x, factor)
            y = o.contiguous(output, write=True)
            if y.numel():
                st.works.append(comm.reduce_scatter(o.operand(x, dt), kop, out=o.operand(y, dt), dtype=dt,
                                                    timeout=tmo, async_op=True))
            st.after.append(lambda: self._finish_reduce(name, y))
            if _scratch is not None:
                st.after.append(lambda: self._release_scratch(_scratch))
        return self._submit("reduce_scatter_single", [output], run)

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter(self, output_tensors: Any, input_tensors: Sequence[Sequence[torch.Tensor]],
                       opts: Any = None) -> HcommWork:
        """Rank r's output gets the reduction over the ranks of their ``input_tensors[0][r]``."""
        out = self._one(output_tensors, "reduce_scatter")
        ins = list(input_tensors[0]) if input_tensors and not isinstance(input_tensors[0], torch.Tensor) \
            else list(input_tensors)
        if len(ins) != self.size() or any(i.numel() != out.numel() or i.dtype != out.dtype for i in ins):
            raise ValueError(f"hcomm: reduce_scatter needs {self.size()} inputs of {out.numel()} x {out.dtype}")
        flat = self._scratch(out.numel() * len(ins), out.dtype)
        torch.cat([i.detach().reshape(-1) for i in ins], out=flat)
        return self.reduce_scatter_single(out, flat, opts, _scratch=flat)

    def reduce_scatter_single_coalesced(self, outputs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor],
                                        opts: Any = None) -> HcommWork:
        """One :meth:`reduce_scatter_single` per pair, completed together."""
        return self._chain_pairs("reduce_scatter_single_coalesced", list(outputs),
                                 lambda o, i: self.reduce_scatter_single(o, i, opts), outputs, inputs)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

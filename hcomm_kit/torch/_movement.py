"""The data movement of the ``hcomm`` backend (broadcast, gathers, scatter, all-to-all, send and
receive), as a mixin of :class:`~hcomm_kit.torch.process_group.ProcessGroupHcomm`.

The list forms (``allgather`` into a list, ``alltoall`` of lists, the root's lists of ``gather`` /
``scatter``) run the collective on one flat staging tensor and copy it to or from the list after it.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch._C import _distributed_c10d as _c10d

from ._options import options
from ._tensors import hk_dtype
from .work import HcommWork, _Stage


class _DataMovement:
    """broadcast, all-gathers, gather, scatter, all-to-all, send / recv; uses the group's plumbing
    (``_submit``, ``_chain_pairs``, ``_args``, ``_check_blocks``, ``_one``, ``_check_cpu``, ``_root``, ``_timeout``, ``_scratch``)."""

    # ---- broadcast --------------------------------------------------------------------------
    def broadcast(self, tensors: Any, opts: Any = None) -> HcommWork:
        """Every rank gets the root's tensor (``opts.rootRank``), in place."""
        opts, t, tmo = self._args("broadcast", tensors, opts, _c10d.BroadcastOptions, "rootRank")
        root = self._root(opts.rootRank, "broadcast")
        dt = hk_dtype(t.dtype, "broadcast")
        comm = self.comm

        def run(st: _Stage) -> None:
            x = st.ops.contiguous(t, write=True)
            if x.numel():
                b = st.ops.operand(x, dt)
                st.works.append(comm.broadcast(b, root, out=b, dtype=dt, timeout=tmo, async_op=True))
        return self._submit("broadcast", [t], run)

    # ---- gathers ------------------------------------------------------------------------------
    def all_gather_single(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> HcommWork:
        """``output`` (``size`` x ``input.numel()`` elements) gets every rank's ``input`` in rank order."""
        opts = options(opts, _c10d.AllgatherOptions)
        self._check_blocks("all_gather_single", output, input, "output")
        dt = hk_dtype(input.dtype, "all_gather_single")
        tmo = self._timeout(opts)
        comm = self.comm

        def run(st: _Stage) -> None:
            o = st.ops
            x = o.contiguous(input, write=False)
            y = o.contiguous(output, write=True)
            if x.numel():
                st.works.append(comm.all_gather(o.operand(x, dt), out=o.operand(y, dt), dtype=dt, timeout=tmo,
                                                async_op=True))
        return self._submit("all_gather_single", [output], run)

    _allgather_base = all_gather_single

    def allgather(self, output_tensors: Sequence[Sequence[torch.Tensor]], input_tensors: Any,
                  opts: Any = None) -> HcommWork:
        """``output_tensors[0][r]`` gets rank r's tensor (all of the input's size)."""
        opts = options(opts, _c10d.AllgatherOptions)
        inp = self._one(input_tensors, "allgather")
        outs = list(output_tensors[0]) if output_tensors and not isinstance(output_tensors[0], torch.Tensor) \
            else list(output_tensors)
        self._check_cpu("allgather", inp, *outs)
        if len(outs) != self.size():
            raise ValueError(f"hcomm: allgather needs {self.size()} output tensors, got {len(outs)}")
        for o_ in outs:
            if o_.numel() != inp.numel() or o_.dtype != inp.dtype:
                raise ValueError(f"hcomm: allgather: every output must match the input ({inp.numel()} x "
                                 f"{inp.dtype}), got {o_.numel()} x {o_.dtype}")
        dt = hk_dtype(inp.dtype, "allgather")
        tmo = self._timeout(opts)
        comm = self.comm
        n = inp.numel()

        def run(st: _Stage) -> None:
            if not n:
                return
            flat = self._scratch(n * self.size(), inp.dtype)
            x = st.ops.contiguous(inp, write=False)
            st.works.append(comm.all_gather(st.ops.operand(x, dt), out=st.ops.operand(flat, dt), dtype=dt,
                                            timeout=tmo, async_op=True))
            st.after.append(lambda: self._split_into(flat, outs))
            st.after.append(lambda: self._release_scratch(flat))
        return self._submit("allgather", [outs], run)

    def allgather_coalesced(self, output_lists: Sequence[Sequence[torch.Tensor]],
                            input_list: Sequence[torch.Tensor], opts: Any = None) -> HcommWork:
        """One :meth:`allgather` per input tensor, completed together."""
        return self._chain_pairs("allgather_coalesced", [list(x) for x in output_lists],
                                 lambda o, i: self.allgather([o], [i], opts), output_lists, input_list)

    def all_gather_single_coalesced(self, outputs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor],
                                    opts: Any = None) -> HcommWork:
        """One :meth:`all_gather_single` per pair, completed together."""
        return self._chain_pairs("all_gather_single_coalesced", list(outputs),
                                 lambda o, i: self.all_gather_single(o, i, opts), outputs, inputs)

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    # ---- gather / scatter ------------------------------------------------------------------------
    def gather(self, output_tensors: Sequence[Sequence[torch.Tensor]], input_tensors: Any,
               opts: Any = None) -> HcommWork:
        """The root's ``output_tensors[0][r]`` gets rank r's tensor; other ranks pass no outputs."""
        return self._rooted("gather", opts, _c10d.GatherOptions, input_tensors, output_tensors, "outputs")

    def scatter(self, output_tensors: Any, input_tensors: Sequence[Sequence[torch.Tensor]],
                opts: Any = None) -> HcommWork:
        """Rank r's output gets the root's ``input_tensors[0][r]``; other ranks pass no inputs."""
        return self._rooted("scatter", opts, _c10d.ScatterOptions, output_tensors, input_tensors, "inputs")

    def _rooted(self, name: str, opts: Any, opts_type: Any, tensor_arg: Any,
                lists: Sequence[Sequence[torch.Tensor]], what: str) -> HcommWork:
        """Check and issue gather / scatter: this rank's tensor (gather's input, scatter's output) and
        the root's list of ``size()`` tensors of as many elements (empty elsewhere), which runs as one
        flat staging tensor (gather: copied into the list after the kernel)."""
        opts = options(opts, opts_type, "rootRank")
        t = self._one(tensor_arg, name)
        root = self._root(opts.rootRank, name)
        mine = self.rank() == root
        many = list(lists[0]) if mine else []
        self._check_cpu(name, t, *many)
        if mine and (len(many) != self.size() or any(x.numel() != t.numel() for x in many)):
            raise ValueError(f"hcomm: {name}: the root needs {self.size()} {what} of {t.numel()} elements")
        dt, tmo, comm, n = hk_dtype(t.dtype, name), self._timeout(opts), self.comm, t.numel()
        gathering = name == "gather"

        def run(st: _Stage) -> None:
            if not n:
                return
            o = st.ops
            x = o.operand(o.contiguous(t, write=not gathering), dt)
            if gathering:
                flat = torch.empty(n * self.size(), dtype=t.dtype) if mine else None
                st.works.append(comm.gather(x, root, out=None if flat is None else o.operand(flat, dt), dtype=dt,
                                            timeout=tmo, async_op=True))
                if flat is not None:
                    st.after.append(lambda: self._split_into(flat, many))
            else:  # non-roots pass no data: count= sizes their block
                flat = o.operand(torch.cat([i.detach().reshape(-1) for i in many]), dt) if mine else None
                st.works.append(comm.scatter(flat, root, out=x, count=None if mine else n, dtype=dt, timeout=tmo,
                                             async_op=True))
        return self._submit(name, ([many] if mine else []) if gathering else [t], run)

    # ---- all-to-all ---------------------------------------------------------------------------
    def all_to_all_single(self, output: torch.Tensor, input: torch.Tensor, output_split_sizes: Sequence[int],
                          input_split_sizes: Sequence[int], opts: Any = None) -> HcommWork:
        """Rows ``input_split_sizes[j]`` of ``input`` go to rank j; ``output`` gets rank i's rows at
        ``output_split_sizes[i]`` (empty split lists: equal blocks)."""
        run = self._a2a("all_to_all_single", output, input, output_split_sizes, input_split_sizes, opts)
        return self._submit("all_to_all_single", [output], run)

    alltoall_base = all_to_all_single

    def alltoall(self, output_tensors: Sequence[torch.Tensor], input_tensors: Sequence[torch.Tensor],
                 opts: Any = None) -> HcommWork:
        """``input_tensors[j]`` goes to rank j; ``output_tensors[i]`` comes from rank i (sizes may differ)."""
        outs, ins = list(output_tensors), list(input_tensors)
        size = self.size()
        if len(outs) != size or len(ins) != size:
            raise ValueError(f"hcomm: alltoall needs {size} input and {size} output tensors")
        dtypes = {t.dtype for t in outs + ins}
        if len(dtypes) != 1:
            raise TypeError(f"hcomm: alltoall: all tensors need one dtype, got {sorted(map(str, dtypes))}")
        self._check_cpu("alltoall", *outs, *ins)
        flat_in = torch.cat([t.detach().reshape(-1) for t in ins])
        flat_out = torch.empty(sum(t.numel() for t in outs), dtype=dtypes.pop())
        run = self._a2a("alltoall", flat_out, flat_in, [t.numel() for t in outs], [t.numel() for t in ins], opts)

        def run_and_copy(st: _Stage) -> None:
            run(st)
            st.after.append(lambda: self._split_into(flat_out, outs))
        return self._submit("alltoall", outs, run_and_copy)

    def _a2a(self, what: str, output: torch.Tensor, input: torch.Tensor, output_split_sizes: Sequence[int],
             input_split_sizes: Sequence[int], opts: Any) -> Callable[[_Stage], None]:
        """Check an all-to-all (rows split by the split sizes) and return the function running it."""
        opts = options(opts, _c10d.AllToAllOptions)
        self._check_cpu(what, output, input)
        if output.dtype != input.dtype:
            raise TypeError(f"hcomm: {what}: output dtype {output.dtype} != input dtype {input.dtype}")
        size = self.size()
        dt = hk_dtype(input.dtype, what)
        tmo = self._timeout(opts)
        comm = self.comm
        in_row = input[0].numel() if input.dim() and input.shape[0] else 0
        out_row = output[0].numel() if output.dim() and output.shape[0] else 0
        in_splits, out_splits = list(input_split_sizes or ()), list(output_split_sizes or ())
        if not in_splits and not out_splits:
            if input.numel() % size or output.numel() != input.numel():
                raise ValueError(f"hcomm: {what}: {input.numel()} input / {output.numel()} output "
                                 f"elements do not split into {size} equal blocks")
            send = recv = None
        else:
            send = [s * in_row for s in (in_splits or [input.shape[0] // size] * size)]
            recv = [s * out_row for s in (out_splits or [output.shape[0] // size] * size)]
            if len(send) != size or len(recv) != size:
                raise ValueError(f"hcomm: {what}: split sizes need {size} entries each")
            if sum(send) != input.numel() or sum(recv) != output.numel():
                raise ValueError(f"hcomm: {what}: splits {in_splits}/{out_splits} do not cover the "
                                 f"input ({input.shape[0]} rows) / output ({output.shape[0]} rows)")

        def run(st: _Stage) -> None:
            o = st.ops
            x = o.contiguous(input, write=False)
            y = o.contiguous(output, write=True)
            if send is None:
                if x.numel():
                    st.works.append(comm.all_to_all(o.operand(x, dt), out=o.operand(y, dt), dtype=dt, timeout=tmo,
                                                    async_op=True))
            else:
                st.works.append(comm.all_to_all_v(o.operand(x, dt) if x.numel() else np.empty(0, dt.numpy), send,
                                                  recv, out=o.operand(y, dt) if y.numel() else np.empty(0, dt.numpy),
                                                  dtype=dt, timeout=tmo, async_op=True))
        return run

    # ---- point to point -------------------------------------------------------------------------
    def send(self, tensors: Any, dst: int, tag: int = 0) -> HcommWork:
        """Send to group rank ``dst`` (which calls :meth:`recv`); ``tag`` is not used: pairs match in order."""
        return self._p2p("send", tensors, dst)

    def recv(self, tensors: Any, src: int, tag: int = 0) -> HcommWork:
        """Receive from group rank ``src`` into the tensor (sized like the sent one)."""
        work = self._p2p("recv", tensors, src)
        work._source_rank = self._root(src, "recv")
        return work

    def _p2p(self, what: str, tensors: Any, peer: int) -> HcommWork:
        """Issue send / recv of one tensor with group rank ``peer``, with the group's timeout."""
        t = self._one(tensors, what)
        self._check_cpu(what, t)
        dt = hk_dtype(t.dtype, what)
        peer = self._root(peer, what)
        receiving = what == "recv"
        call, tmo = (self.comm.recv if receiving else self.comm.send), self._timeout_s

        def run(st: _Stage) -> None:
            x = st.ops.contiguous(t, write=receiving)
            if x.numel():
                st.works.append(call(st.ops.operand(x, dt), peer, dtype=dt, timeout=tmo, async_op=True))
        return self._submit(what, [t], run)

    def recv_anysource(self, tensors: Any, tag: int = 0) -> HcommWork:
        """Not supported: HCCL's point-to-point calls need the peer.

        Raises:
            NotImplementedError: always (``dist.recv`` without ``src``); pass ``src=``.
        """
        raise NotImplementedError("hcomm: recv_anysource (dist.recv without src) is not supported: HCCL "
                                  "point-to-point needs the peer; pass src=")

"""The built-in collectives: ``comm.all_reduce(x)`` and friends.

Every collective is an ordinary operator directory in ``aicpu_kernels/`` (built, loaded and
launched through the same path as users' operators: :class:`hcomm_kit.ops.custom_op.CustomOp`). This module
only maps the Python API onto ``CustomOp.launch``: it stages host arrays through the operator's
pooled device buffers, picks the algorithm id, and returns the output (or a :class:`Work`).

Conventions (as ``torch.distributed`` / mpi4py users expect):

* Inputs: numpy arrays, :class:`DeviceBuffer` (no host copies), or objects with DLPack / the
  buffer protocol. ``dtype=`` overrides the element type (``"bf16"`` for uint16 bit patterns).
* ``out=``: a numpy array or DeviceBuffer to fill; ``out=x`` is in-place. Without it a new numpy
  array is returned (a new DeviceBuffer when the input is one).
* ``async_op=True`` returns a :class:`Work` (``wait()`` gives the output, ``is_completed()``).
  ``async_op="stream"`` only enqueues on the stream and returns the output DeviceBuffer at once,
  as the HCCL C API does (``HcclAllReduce(..., stream)``): calls queue back to back, and the
  caller synchronizes the stream (``comm.stream.synchronize()``), which raises the first error.
  It needs DeviceBuffer input and output (host arrays need a wait to be copied back), which the
  caller keeps alive until the stream is synchronized (the emulator reports a freed buffer).
* ``op``: ``"sum"``, ``"prod"``, ``"max"``, ``"min"``, or ``"avg"`` = sum, then divided by the rank
  count on the host (floats: in the dtype's precision; integers: truncated toward zero).
  Dtypes and ops per product are those of CANN's HcclAllReduce / HcclReduce /
  HcclReduceScatter (``hcomm_kit.base.dtypes.HCCL_API_REDUCE``): A2/A3 int8, int16, int32, int64,
  fp16, fp32, bf16 with sum/prod/max/min (prod not for int16/bf16); Ascend950 also uint64, fp64.
* ``algorithm=``: by default the algorithm CANN's HCCL chooses for the call (its AICPU auto
  selector's rule for the collective, size, dtype, op and topology; ``HCCL_ALGO`` as read when the
  communicator was created; :mod:`hcomm_kit.ops.selector`, made in the emulator for the C API and
  these alike). A name forces one: CANN's (:data:`ALGORITHMS`, e.g.
  ``"AicpuAllReduceSoleMeshTwoShot"``, also ``"SoleMeshTwoShot"`` or ``"meshtwoshot"``; any case), an
  alias of :data:`~hcomm_kit.ops.algorithms.ALIASES` (``mesh``, ``nhr``, ``hierarchical``),
  ``"auto"``, or ``"fastest"``: every algorithm of the kernels run once on scratch buffers, the one
  the timing model predicts fastest kept (per collective, size, dtype and op). The multi-level
  algorithms (``...ParallelMeshNHR``, ``...SequenceMeshConcurNHR``) need servers of equal size
  (ConfigError otherwise) and get their layout from the topology (``OpParam.hierInfo``).
  :attr:`CollectiveOps.last_selection` is the choice of the last call.
* Rooted results (``reduce``, ``gather``) are returned on the root and ``None`` elsewhere.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..base import dtypes as _dtypes
from ..core.device import _D2H, _H2D, DeviceBuffer, as_host_array, host_ptr
from ..base.errors import ConfigError
from .algorithms import _AUTO, ALGORITHMS, LEVELS, WRITE_REDUCE, check_runnable, resolve
from .call_plans import FastPlan, PlannedCalls, try_fast, try_fast_host
from .custom_op import CustomOp
from ..base.resources import aicpu_kernels_dir
from ..base.validate import as_count, as_rank, check_out_array

__all__ = ["ALGORITHMS", "CollectiveOps"]


_MAX_PEERS = 64  # alltoallv count arrays (op.toml [[param]] array = 64)
# Built-in operator -> the Python method that calls it (for the collective-call check's messages).
_API_NAMES = {"allreduce": "all_reduce", "allgather": "all_gather", "alltoall": "all_to_all",
              "alltoallv": "all_to_all_v"}
_ROOTED = frozenset({"broadcast", "reduce", "scatter", "gather"})
_DT_CACHE: dict = {}  # (dtype argument, numpy dtype) -> DType row (hot path)


class CollectiveOps(PlannedCalls):
    """The built-in collectives, mixed into :class:`~hcomm_kit.ops.communicator.Communicator`.

    Operators are built and loaded on first use (``comm.load_op`` caches them); see the module
    docstring for the conventions shared by every method.
    """

    # Provided by the communicator.
    rank: int
    size: int
    rt: Any
    _builtins: dict[str, CustomOp]
    _hccl_algo: str | None
    _call_check: Any
    _sig_cache: dict

    # ---- plumbing -----------------------------------------------------------------------------
    def _topo(self) -> Any:
        """This communicator's topology (read once: it is fixed at creation)."""
        topo = self.__dict__.get("_topology_cache")
        if topo is None:
            topo = self.__dict__["_topology_cache"] = self.topology  # type: ignore[attr-defined]
        return topo

    #: The algorithm of the last built-in call on this communicator (:class:`hcomm_kit.ops.selector.Selection`).
    last_selection: Any = None

    def _selection(self, name: str, count: int, dt: Any, reduce_op: Any, algorithm: Any, params: dict | None,
                   trial: Any) -> Any:
        """The algorithm of this call: CANN's choice, ``HCCL_ALGO``'s, ``algorithm=``'s, or the timing
        model's fastest. Cached per (collective, count, dtype, op, algorithm): every rank computes the
        same, and the emulator logs and traces each choice once."""
        cache = self.__dict__.setdefault("_selection_cache", {})
        key = (name, count, dt.value, reduce_op, algorithm, params.get("direction") if params else None)
        sel = cache.get(key)
        if sel is None:
            from . import selector

            asked = None if algorithm is None else resolve(name, str(algorithm))
            rop = _dtypes.get_reduce_op(reduce_op).value if reduce_op is not None else 0
            if self.rt.backend != "emu" or not self.rt.has("HcommKitAlgoSelect"):
                # CANN's own runtime has no emulator to ask: a forced kernel, else the kernel's choice
                if asked == "fastest":
                    raise ConfigError(f"{name}: algorithm='fastest' needs the timing model (the emulator backend)",
                                      key="algorithm")
                kernel = ALGORITHMS[name].get(asked or "auto", _AUTO)
                sel = selector.Selection(name=asked if kernel else "", chosen=asked if kernel else "",
                                         how="kernel's own" if not kernel else f"algorithm={asked}", kernel=kernel)
            elif asked == "fastest":
                auto = selector.select(self, name, count, dt.value, rop, None, params)  # links down: raises first
                cands = [(n, k) for n, k in ALGORITHMS[name].items() if n != "auto"]
                best = selector.fastest_of(cands, trial)
                sel = selector.select(self, name, count, dt.value, rop, best.name, params)
                sel = selector.Selection(name=sel.name, chosen=sel.chosen, cann=auto.cann, source=auto.source,
                                         how=f"algorithm=fastest: {best.how}", kernel=sel.kernel,
                                         modelled=best.modelled)
            else:
                sel = selector.select(self, name, count, dt.value, rop, None if asked in (None, "auto") else asked,
                                      params)
            if len(cache) < 1024:
                cache[key] = sel
        return sel

    def _hier_info(self, name: str) -> int:
        """Device address of this communicator's layout of servers and super-pods
        (``OpParam.hierInfo``, the words of aicpu_kernels/_common/hk_coll.h ``HkLevelsRead``: rank
        count, server count, super-pod count, each rank's server, each server's super-pod), made
        once from the topology; ConfigError when its servers differ in size."""
        info = self.__dict__.get("_hier_info_cache")
        if info is None:
            from .selector import two_level

            topo = self._topo()
            servers = two_level(topo, self.size)
            if isinstance(servers, str):
                info = servers
            else:
                nsrv = len(servers)
                words = np.zeros(3 + self.size + nsrv, np.uint32)
                words[0], words[1], words[2] = self.size, nsrv, len(topo.pods)
                for s, ranks in enumerate(servers):
                    words[3 + np.asarray(ranks)] = s
                for p, members in enumerate(topo.pods):
                    for s in members:
                        words[3 + self.size + s] = p
                info = DeviceBuffer.from_numpy(words, rt=self.rt)
            self.__dict__["_hier_info_cache"] = info
        if isinstance(info, str):
            raise ConfigError(f"{name}: a multi-level algorithm cannot run on this communicator: {info} "
                              f"({self._topo().source})", key="algorithm")
        return info.ptr

    # ---- plumbing -----------------------------------------------------------------------------
    def builtin_op(self, name: str) -> CustomOp:
        """The loaded built-in operator ``name`` (a directory of ``aicpu_kernels/``)."""
        op = self._builtins.get(name)
        if op is None:
            # the reducing ones follow CANN's per-API dtype/op table (CustomOp: BUILTIN_HCCL_API)
            op = self._builtins[name] = self.load_op(aicpu_kernels_dir() / name)  # type: ignore[attr-defined]
        return op

    @staticmethod
    def _host(x: Any) -> np.ndarray:
        arr = as_host_array(x)
        return arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)

    @staticmethod
    def _dtype(x: Any, dtype: Any) -> "_dtypes.DType":
        key = (dtype, None if x is None or isinstance(x, DeviceBuffer) else x.dtype)
        dt = _DT_CACHE.get(key)
        if dt is None:
            if dtype is not None:
                dt = _dtypes.get_dtype(dtype)
            elif isinstance(x, DeviceBuffer):
                return x.dtype
            else:
                dt = _dtypes.get_dtype(x.dtype)
            _DT_CACHE[key] = dt
        return dt

    def _stage_in(self, op: CustomOp, x: Any, dt: "_dtypes.DType", nelems: int) -> int:
        nbytes = nelems * dt.itemsize
        if isinstance(x, DeviceBuffer):
            x.address(f"{op.name}: the input")
            if nbytes > x.capacity:
                raise ConfigError(f"{op.name}: the input buffer holds {x.capacity} bytes, the call needs {nbytes} "
                                  f"({nelems} x {dt.name})", key="input")
            return x.ptr
        arr = x
        if arr.nbytes < nbytes:
            raise ConfigError(f"{op.name}: the input holds {arr.nbytes} bytes, the call needs {nbytes} "
                              f"({nelems} x {dt.name})", key="input")
        ptr = op._pool.get("in", nbytes)[0]
        if nbytes:
            ret = self.rt.acl.aclrtMemcpy(ptr, nbytes, host_ptr(arr), nbytes, _H2D)
            if ret:
                raise op._error(ret, "aclrtMemcpy", None)
        return ptr

    def _stage_out(self, op: CustomOp, out: Any, device: bool, shape: tuple[int, ...], dt: "_dtypes.DType",
                   in_ptr: int, same_as_input: bool) -> tuple[int, Any]:
        """(device pointer the kernel writes, finisher returning the user-visible result)."""
        nelems = math.prod(shape)
        nbytes = nelems * dt.itemsize
        rt = self.rt
        if isinstance(out, DeviceBuffer):
            out.address(f"{op.name}: out=")
            if out.dtype is not dt and out.dtype.name != dt.name:
                raise ConfigError(f"{op.name}: out= is a DeviceBuffer of {out.dtype.name}, the result is {dt.name} "
                                  f"(the bytes would be reinterpreted); pass a {dt.name} buffer of >= {nbytes} bytes",
                                  key="out")
            if out.capacity < nbytes:
                raise ConfigError(f"{op.name}: out= holds {out.capacity} bytes, the result needs {nbytes} "
                                  f"({nelems} x {dt.name})", key="out")
            return out.ptr, lambda: out
        if out is None and device:
            buf = DeviceBuffer.empty(shape, dt, rt=rt)
            return buf.ptr, lambda: buf
        if out is not None:
            host = out if type(out) is np.ndarray else as_host_array(out)
            check_out_array(host, dt.numpy, nelems, dt.name, op.name)
        else:
            host = None
        # In place on the host: the kernel still reads and writes device memory; stage separately
        # unless the operator runs in place on the device too (saves a buffer and a copy).
        ptr = in_ptr if same_as_input else op._pool.get("out", nbytes)[0]

        def finish():
            res = host if host is not None else np.empty(shape, dtype=dt.numpy)
            if nbytes:
                ret = rt.acl.aclrtMemcpy(host_ptr(res), nbytes, ptr, nbytes, _D2H)
                if ret:
                    raise op._error(ret, "aclrtMemcpy", None)
            return res
        return ptr, finish

    def _call(self, name: str, x: Any, *, in_elems: int, out_shape: tuple[int, ...] | None, out: Any, count: int,
              dtype: Any, reduce_op: Any = None, root: int = 0, algorithm: str | None = None, async_op: bool | str,
              timeout: float | None, stream: Any = None, post=None, inplace_ok: bool = False,
              params: dict | None = None, want_result: bool = True, fast_key: tuple | None = None) -> Any:
        # A call repeated on the same device buffers with the same arguments (the blocking or
        # stream-ordered loop of a benchmark, a training step's small collectives) runs the plan its
        # first call left: every argument was checked then, and nothing of it can have changed.
        plan_key = None
        if (type(x) is DeviceBuffer and type(out) is DeviceBuffer and async_op is not True and dtype is None
                and algorithm is None and timeout is None and stream is None and post is None and params is None
                and want_result and (reduce_op is None or type(reduce_op) is str)):
            plan_key = (name, x.ptr, x.capacity, x.dtype.value, out.ptr, out.capacity, out.dtype.value, count,
                        in_elems, out_shape, reduce_op, root, async_op)
            plan = self._plans.get(plan_key)
            if plan is not None:
                res = self._run_plan(plan, out, async_op)
                if fast_key is not None and plan[0]._stream_calls is not None:
                    self._keep_fast(fast_key, FastPlan(plan[0], plan, async_op))
                return res
        op = self._builtins.get(name) or self.builtin_op(name)
        device = isinstance(x, DeviceBuffer)
        if async_op == "stream":
            # Enqueue only, as the HCCL C API does: nothing may need the host after the kernel.
            if x is not None and not device:
                why = f"the input is a host {type(x).__name__}, not a DeviceBuffer"
            elif want_result and out_shape is not None and not (isinstance(out, DeviceBuffer) or
                                                                (out is None and device)):
                why = f"out= is a host {type(out).__name__}, not a DeviceBuffer"
            elif post is not None:
                why = "'avg' divides on the host after the kernel"
            else:
                why = None
            if why:
                raise ConfigError(f"{name}: async_op='stream' only enqueues on the stream, so it needs "
                                  f"DeviceBuffer input and output and a reduce op the kernel applies; {why} "
                                  f"(use async_op=True)", key="async_op")
        elif async_op not in (True, False):
            raise ConfigError(f"{name}: async_op={async_op!r}; use False, True or 'stream'", key="async_op")
        elif op._pending is not None:
            op._pending.wait()  # its pooled buffers are about to be reused
        dt = self._dtype(x, dtype)
        xin = x if device or x is None else self._host(x)
        if xin is not None and not device and xin.itemsize != dt.itemsize:
            raise ConfigError(f"{name}: input dtype {xin.dtype} does not hold {dt.name} elements "
                              f"({xin.itemsize} != {dt.itemsize} bytes)", key="dtype")
        in_ptr = self._stage_in(op, xin, dt, in_elems) if xin is not None else 0
        same = inplace_ok and out is not None and out is x and not device
        if out_shape is None:
            out_ptr, finish = 0, (lambda: None)
        elif not want_result:  # a non-root of a rooted collective: scratch output, nothing returned
            nbytes = math.prod(out_shape) * dt.itemsize
            out_ptr, finish = op._pool.get("scratch", nbytes)[0], (lambda: None)  # never read by the host
        else:
            out_ptr, finish = self._stage_out(op, out, device, out_shape, dt, in_ptr, same)
        if post is not None:
            raw = finish
            finish = lambda: post(raw())  # noqa: E731
        sel = self._selection(name, count, dt, reduce_op, algorithm, params,
                              lambda k: self._trial(op, name, k, count, dt, reduce_op, root, in_ptr, out_ptr,
                                                    params, stream, timeout))
        self.last_selection = sel
        algo = sel.kernel
        asked = algo if algorithm is not None else 0  # what the caller asked: part of the call check
        if algo in WRITE_REDUCE:  # raises before the call is posted
            rv = None if reduce_op is None else (reduce_op.value if hasattr(reduce_op, "value")
                                                 else _dtypes.get_reduce_op(reduce_op).value)
            check_runnable(name, algo, self.device.soc, dt.value, rv)  # type: ignore[attr-defined]
        hier = self._hier_info(name) if algo in LEVELS else 0  # raises before the call is posted
        # what the caller asked: checked (on the emulator) as the first call of the launch sequence
        check = self._check_call(op, name, count, dt, reduce_op, root, asked, params) \
            if self._call_check is not None else None
        if hier:
            params = {**(params or {}), "hierInfo": hier}
        op_params = {**params, "algo": algo} if params else {"algo": algo}
        if plan_key is not None:
            if len(self._plans) >= 256:
                self._plans.clear()
            self._plans[plan_key] = (op, in_ptr, out_ptr, count, op_params, check[3] if check else None,
                                     op._resolve(dt, reduce_op, root, stream, timeout))
        s = op._enqueue(in_ptr, out_ptr, count, dt, reduce_op, root, stream, timeout, op_params, sync=not async_op,
                        check=check)
        if async_op == "stream":
            return finish()
        if async_op:  # the Work holds a DeviceBuffer input until the kernel finished
            return op.complete(finish, stream=s, timeout=timeout, async_op=True, keep=x if device else None)
        if s >= 0:  # enqueued only (CANN): wait here
            op.synchronize(s, timeout)
        return finish()

    def _trial(self, op: CustomOp, name: str, kernel: int, count: int, dt: Any, reduce_op: Any, root: int,
               in_ptr: int, out_ptr: int, params: dict | None, stream: Any, timeout: float | None) -> float | None:
        """``algorithm="fastest"``: one run of the built-in with kernel algorithm ``kernel`` on
        scratch copies of this call's buffers (every rank makes the same runs), its modelled time
        (us); None when that algorithm does not apply here (a multi-level one on one server or on
        servers of unequal sizes, a write-reduce one for this dtype and op)."""
        if kernel in LEVELS and len(self._topo().servers) < 2:
            return None  # CANN offers the multi-level algorithms only across servers
        try:
            hier = self._hier_info(name) if kernel in LEVELS else 0
            if kernel in WRITE_REDUCE and reduce_op is not None:
                check_runnable(name, kernel, self.device.soc, dt.value,  # type: ignore[attr-defined]
                               _dtypes.get_reduce_op(reduce_op).value)
        except ConfigError:
            return None
        from ..base import envs

        if not envs.model_enabled() or self.size < 2:
            raise ConfigError(f"{name}: algorithm='fastest' needs the timing model (on by default; HCOMM_KIT_MODEL=0 "
                              f"turns it off) and at least 2 ranks", key="algorithm")
        nbytes_in = count * dt.itemsize * max(1, self.size)
        t_in = op._pool.get("trial_in", nbytes_in)[0] if in_ptr else 0
        t_out = op._pool.get("trial_out", nbytes_in)[0] if out_ptr else 0
        if t_in:
            self.rt.checked.aclrtMemset(t_in, nbytes_in, 0, nbytes_in)
        trial_params = {**(params or {}), "algo": kernel, **({"hierInfo": hier} if hier else {})}
        s = op._enqueue(t_in, t_out, count, dt, reduce_op, root, stream, timeout, trial_params, sync=True, check=None)
        if s >= 0:
            op.synchronize(s, timeout)
        return self.last_model_time

    def _check_call(self, op: CustomOp, name: str, count: int, dt: "_dtypes.DType", reduce_op: Any, root: int,
                    algo: int, params: dict | None) -> tuple | None:
        """Every rank must make the same call here (CustomOp.check_call): the token of the check
        that the launch makes first (it raises before anything is enqueued)."""
        if name == "send_recv":  # enqueued on a stream: checked per direction, as every send / recv
            self._p2p._check_transfer(bool(params["direction"]) if params else False, root, count, dt)
            return None
        key = (name, count, dt.value, reduce_op, root, algo)
        sig = self._sig_cache.get(key)
        if sig is None:
            if name == "alltoallv":
                args = [f"dtype={dt.name}"]  # the counts differ per rank by design
            else:
                args = [f"count={count}", f"dtype={dt.name}"]
            if op._reduce_ok:
                args.append(f"op={_dtypes.get_reduce_op(reduce_op if reduce_op is not None else 'sum').name}")
            if name in _ROOTED:
                args.append(f"root={root}")
            if algo:
                args.append(f"algorithm={algo}")
            sig = f"{_API_NAMES.get(name, name)}({', '.join(args)})"
            if len(self._sig_cache) < 256:
                self._sig_cache[key] = sig
        return op._post_check(sig)

    def _rop(self, op: Any, x: Any, dtype: Any) -> tuple[Any, Any]:
        """(reduce op for the kernel, host post-processing) — ``avg`` is sum, then divide."""
        if type(op) is str and op == "sum":
            return op, None
        if isinstance(op, str) and op.strip().lower() in ("avg", "mean", "average"):
            n, dt = self.size, self._dtype(x, dtype)
            return "sum", lambda res: _divide(res, n, dt)
        return op, None

    def _root(self, root: int) -> int:
        return as_rank(root, self.size, "root")

    def _prepare(self, x: Any) -> Any:
        return x if isinstance(x, DeviceBuffer) or x is None else self._host(x)

    @staticmethod
    def _size(x: Any) -> int:
        return x.size if x is not None else 0

    @staticmethod
    def _shape(x: Any) -> tuple[int, ...]:
        return tuple(x.shape)

    def _blocks(self, name: str, x: Any) -> tuple[int, tuple[int, ...]]:
        """(per-rank count, per-rank shape) of an input holding one block per rank."""
        n, size = self._size(x), self.size
        if n % size:
            raise ConfigError(f"{name}: the input's {n} elements do not split into {size} equal blocks "
                              f"(one per rank)", key="input")
        shape = self._shape(x)
        if len(shape) >= 1 and shape[0] % size == 0:
            return n // size, (shape[0] // size, *shape[1:])
        return n // size, (n // size,)

    # ---- the collectives ------------------------------------------------------------------------
    def all_reduce(self, x: Any, op: Any = "sum", *, out: Any = None, dtype: Any = None, algorithm: str | None = None,
                   async_op: bool | str = False, timeout: float | None = None, stream: Any = None) -> Any:
        """Every rank gets the element-wise reduction of every rank's ``x`` (same shape)."""
        fast_key = None
        if (type(x) is np.ndarray and (out is None or type(out) is np.ndarray) and async_op is False
                and type(op) is str and dtype is None and algorithm is None and timeout is None and stream is None):
            # a small host array: through its device pair (_small_host), compiled where it builds
            compiled = try_fast_host()
            res = compiled(self, x, op, out) if compiled is not None else None
            if type(res) is np.ndarray:
                return res
            res = self._small_host_call(x, op, out, res)
            if res is not None:
                return res
        if (type(x) is DeviceBuffer and type(out) is DeviceBuffer and type(op) is str and dtype is None
                and algorithm is None and timeout is None and stream is None and async_op is not True):
            compiled = try_fast()
            ret = compiled(self, x, out, op, async_op) if compiled is not None else None
            # the compiled helper builds this key too (fastcall.cc, plan_key)
            fast_key = None if ret == 0 else (x.ptr, x.capacity, x.dtype.value, x.shape, out.ptr, out.capacity,
                                              out.dtype.value, op, async_op)
            if ret is not None:  # made by the compiled helper from the plan of fast_key
                if ret:
                    self._fast_failed(self._fast[fast_key], ret)
                return out
            plan = self._fast.get(fast_key)
            if plan is not None:
                return self._run_fast(plan, out, async_op)
        x = self._prepare(x)
        rop, post = self._rop(op, x, dtype)
        n = self._size(x)
        return self._call("allreduce", x, in_elems=n, out_shape=self._shape(x), out=out, count=n, dtype=dtype,
                          reduce_op=rop, algorithm=algorithm, async_op=async_op, timeout=timeout, stream=stream,
                          post=post, inplace_ok=True, fast_key=fast_key)

    def all_gather(self, x: Any, *, out: Any = None, dtype: Any = None, algorithm: str | None = None,
                   async_op: bool | str = False, timeout: float | None = None, stream: Any = None) -> Any:
        """Every rank gets every rank's ``x`` concatenated along the first axis, in rank order."""
        x = self._prepare(x)
        n, size = self._size(x), self.size
        shape = self._shape(x)
        out_shape = (size * shape[0], *shape[1:]) if shape else (size,)
        return self._call("allgather", x, in_elems=n, out_shape=out_shape, out=out, count=n, dtype=dtype,
                          algorithm=algorithm, async_op=async_op, timeout=timeout, stream=stream)

    def reduce_scatter(self, x: Any, op: Any = "sum", *, out: Any = None, dtype: Any = None,
                       algorithm: str | None = None, async_op: bool | str = False, timeout: float | None = None,
                       stream: Any = None) -> Any:
        """Reduce ``x`` (one equal block per rank) over the ranks; rank r gets reduced block r."""
        x = self._prepare(x)
        rop, post = self._rop(op, x, dtype)
        per, shape = self._blocks("reduce_scatter", x)
        return self._call("reduce_scatter", x, in_elems=per * self.size, out_shape=shape, out=out, count=per,
                          dtype=dtype, reduce_op=rop, algorithm=algorithm, async_op=async_op, timeout=timeout,
                          stream=stream, post=post)

    def broadcast(self, x: Any, root: int = 0, *, out: Any = None, dtype: Any = None, algorithm: str | None = None,
                  async_op: bool | str = False, timeout: float | None = None, stream: Any = None) -> Any:
        """Every rank gets the root's ``x`` (other ranks' ``x`` gives shape and dtype; ``out=x`` is in place)."""
        x = self._prepare(x)
        n = self._size(x)
        return self._call("broadcast", x, in_elems=n, out_shape=self._shape(x), out=out, count=n, dtype=dtype,
                          root=self._root(root), algorithm=algorithm, async_op=async_op, timeout=timeout,
                          stream=stream, inplace_ok=True)

    def reduce(self, x: Any, root: int = 0, op: Any = "sum", *, out: Any = None, dtype: Any = None,
               algorithm: str | None = None, async_op: bool | str = False, timeout: float | None = None,
               stream: Any = None) -> Any:
        """The root gets the element-wise reduction of every rank's ``x``; other ranks get None."""
        x = self._prepare(x)
        r = self._root(root)
        rop, post = self._rop(op, x, dtype)
        n = self._size(x)
        mine = self.rank == r
        return self._call("reduce", x, in_elems=n, out_shape=self._shape(x), out=out if mine else None,
                          count=n, dtype=dtype, reduce_op=rop, root=r, algorithm=algorithm, async_op=async_op,
                          timeout=timeout, stream=stream, post=post, inplace_ok=True, want_result=mine)

    def scatter(self, x: Any, root: int = 0, *, out: Any = None, count: int | None = None, dtype: Any = None,
                algorithm: str | None = None, async_op: bool | str = False, timeout: float | None = None,
                stream: Any = None) -> Any:
        """Rank r gets block r of the root's ``x`` (``x`` holds one equal block per rank).

        Non-roots pass an ``x`` of the same shape (contents unused), or ``x=None`` with ``out=``
        or ``count=`` and ``dtype=``.
        """
        r = self._root(root)
        size = self.size
        if x is None and self.rank == r:
            raise ConfigError("scatter: the root must pass the data to scatter", key="input")
        if x is None:
            per = as_count(count) if count is not None else (out.size if out is not None else None)
            if per is None:
                raise ConfigError("scatter: a non-root rank without x needs out= or count= (and dtype=)", key="count")
            dt = _dtypes.get_dtype(dtype if dtype is not None else
                                   (out.dtype if out is not None else "fp32"))
            shape: tuple[int, ...] = tuple(out.shape) if out is not None else (int(per),)
            return self._call("scatter", None, in_elems=0, out_shape=shape, out=out, count=int(per), dtype=dt,
                              root=r, algorithm=algorithm, async_op=async_op, timeout=timeout, stream=stream)
        x = self._prepare(x)
        per, shape = self._blocks("scatter", x)
        return self._call("scatter", x, in_elems=per * size if self.rank == r else 0, out_shape=shape,
                          out=out, count=per, dtype=dtype, root=r, algorithm=algorithm, async_op=async_op,
                          timeout=timeout, stream=stream)

    def gather(self, x: Any, root: int = 0, *, out: Any = None, dtype: Any = None, algorithm: str | None = None,
               async_op: bool | str = False, timeout: float | None = None, stream: Any = None) -> Any:
        """The root gets every rank's ``x`` concatenated along the first axis; others get None."""
        x = self._prepare(x)
        r = self._root(root)
        n, size = self._size(x), self.size
        shape = self._shape(x)
        mine = self.rank == r
        out_shape = ((size * shape[0], *shape[1:]) if shape else (size,)) if mine else (n,)
        return self._call("gather", x, in_elems=n, out_shape=out_shape, out=out if mine else None, count=n,
                          dtype=dtype, root=r, algorithm=algorithm, async_op=async_op, timeout=timeout, stream=stream,
                          want_result=mine)

    def all_to_all(self, x: Any, *, out: Any = None, dtype: Any = None, algorithm: str | None = None,
                   async_op: bool | str = False, timeout: float | None = None, stream: Any = None) -> Any:
        """Block j of ``x`` (one equal block per rank) goes to rank j; block i of the result came from rank i."""
        x = self._prepare(x)
        per, _ = self._blocks("all_to_all", x)
        return self._call("alltoall", x, in_elems=per * self.size, out_shape=self._shape(x), out=out,
                          count=per, dtype=dtype, algorithm=algorithm, async_op=async_op, timeout=timeout,
                          stream=stream)

    def all_to_all_v(self, x: Any, send_counts: Any, recv_counts: Any = None, *, send_displs: Any = None,
                     recv_displs: Any = None, out: Any = None, dtype: Any = None, algorithm: str | None = None,
                     async_op: bool | str = False, timeout: float | None = None, stream: Any = None) -> Any:
        """Rank i sends ``send_counts[j]`` elements (from ``send_displs[j]``) to rank j.

        Displacements default to packed (exclusive prefix sums). Without ``recv_counts`` the counts
        are exchanged first (one small all_to_all). The result is 1-D of ``sum(recv_counts)``
        elements, or fills ``out`` (``recv_displs`` index into it).
        """
        x = self._prepare(x)
        size = self.size
        if size > _MAX_PEERS:
            raise ConfigError(f"all_to_all_v supports at most {_MAX_PEERS} ranks, got {size}", key="ranks")
        sc = _counts("send_counts", send_counts, size)
        if recv_counts is None:
            rc = self.all_to_all(sc.astype(np.uint64)).astype(np.int64)
        else:
            rc = _counts("recv_counts", recv_counts, size)
        sd = _displs("send_displs", send_displs, sc)
        rd = _displs("recv_displs", recv_displs, rc)
        n_in = int((sd + sc).max(initial=0))
        if n_in > self._size(x):
            raise ConfigError(f"all_to_all_v: send counts/displacements reach element {n_in} but the input has "
                              f"{self._size(x)}", key="send_counts")
        n_out = int((rd + rc).max(initial=0))
        if out is not None and getattr(out, "size", n_out) < n_out:
            raise ConfigError(f"all_to_all_v: out= holds {out.size} elements but recv counts/displacements reach "
                              f"element {n_out}", key="out")
        params = {"sendCounts": sc, "sdispls": sd, "recvCounts": rc, "rdispls": rd}
        return self._call("alltoallv", x, in_elems=n_in, out_shape=(n_out,) if out is None else tuple(out.shape),
                          out=out, count=0, dtype=dtype, algorithm=algorithm, async_op=async_op, timeout=timeout,
                          stream=stream, params=params)

    def send(self, x: Any, dst: int, *, dtype: Any = None, async_op: bool | str = False, timeout: float | None = None,
             stream: Any = None) -> Any:
        """Send ``x`` to rank ``dst``, which receives it with :meth:`recv`.

        Sends and receives pair per peer and direction, in order (see :mod:`hcomm_kit.ops.p2p`):
        this rank's k-th send to ``dst`` is ``dst``'s k-th receive from this rank. A blocking call
        returns once ``dst`` received it; ``async_op=True`` posts it and returns a Work (the posted
        calls start together when one of them is waited for); ``async_op="stream"`` / ``stream=``
        enqueue at once on the stream (calls then run in the order they were made, as HcclSend).

        Returns:
            None, or a Work whose ``wait()`` returns None.
        """
        peer = self._peer(dst, "send")
        if async_op == "stream" or stream is not None:
            x = self._prepare(x)
            n = self._size(x)
            return self._call("send_recv", x, in_elems=n, out_shape=None, out=None, count=n, dtype=dtype, root=peer,
                              async_op=async_op, timeout=timeout, stream=stream, params={"direction": 0})
        if async_op not in (True, False):
            raise ConfigError(f"send: async_op={async_op!r}; use False, True or 'stream'", key="async_op")
        return self._p2p.post(False, peer, x, dtype, timeout, async_op)

    def recv(self, out: Any, src: int, *, dtype: Any = None, async_op: bool | str = False, timeout: float | None = None,
             stream: Any = None) -> Any:
        """Receive into ``out`` (numpy array or DeviceBuffer, sized like the sender's data) from ``src``.

        Pairs with ``src``'s sends to this rank in order (see :meth:`send` for ``async_op``).

        Returns:
            ``out``, or a Work whose ``wait()`` returns it.
        """
        peer = self._peer(src, "recv")
        if out is None:
            raise ConfigError("recv: pass out= (an array or DeviceBuffer sized like the sent data)", key="out")
        if async_op == "stream" or stream is not None:
            o = out if isinstance(out, DeviceBuffer) else as_host_array(out)
            dt = _dtypes.get_dtype(dtype if dtype is not None else o.dtype)
            return self._call("send_recv", None, in_elems=0, out_shape=tuple(o.shape), out=out, count=o.size,
                              dtype=dt, root=peer, async_op=async_op, timeout=timeout, stream=stream,
                              params={"direction": 1})
        if async_op not in (True, False):
            raise ConfigError(f"recv: async_op={async_op!r}; use False, True or 'stream'", key="async_op")
        return self._p2p.post(True, peer, out, dtype, timeout, async_op)

    def barrier(self, *, async_op: bool | str = False, timeout: float | None = None, stream: Any = None) -> Any:
        """Every rank waits until every rank has reached the barrier.

        With links taken down (``HCOMM_KIT_LINKS_DOWN``) the built-in barrier (a mesh of channels)
        cannot run: ``HcclBarrier`` does instead (waited for unless ``async_op="stream"``).
        """
        if self._topo().links_down:
            h = getattr(stream, "handle", stream) or self.stream.handle  # type: ignore[attr-defined]
            self.rt.checked.HcclBarrier(self.handle, h)  # type: ignore[attr-defined]
            if async_op != "stream":
                self.rt.checked.aclrtSynchronizeStream(h)
            return None
        return self._call("barrier", None, in_elems=0, out_shape=None, out=None, count=0, dtype="int8",
                          async_op=async_op, timeout=timeout, stream=stream)

    def _peer(self, peer: int, what: str) -> int:
        p = as_rank(peer, self.size, "dst" if what == "send" else "src")
        if p == self.rank:
            raise ConfigError(f"{what}: peer {p} is this rank; a rank cannot {what} to or from itself", key="peer")
        return p


def _counts(name: str, counts: Any, size: int) -> np.ndarray:
    c = np.asarray(counts, dtype=np.int64).ravel()
    if c.size != size:
        raise ConfigError(f"all_to_all_v: {name} needs one entry per rank ({size}), got {c.size}", key=name)
    if (c < 0).any():
        raise ConfigError(f"all_to_all_v: {name} has a negative entry: {c.tolist()}", key=name)
    return c


def _displs(name: str, displs: Any, counts: np.ndarray) -> np.ndarray:
    if displs is None:
        d = np.zeros_like(counts)
        np.cumsum(counts[:-1], out=d[1:])
        return d
    d = np.asarray(displs, dtype=np.int64).ravel()
    if d.size != counts.size or (d < 0).any():
        raise ConfigError(f"all_to_all_v: {name} needs {counts.size} non-negative entries, got {d.tolist()}",
                          key=name)
    return d


def _divide(res: Any, n: int, dt: "_dtypes.DType") -> Any:
    """``avg``: the sum divided by the rank count, in place, in the result's own dtype.

    Floats round once (bf16: through float32); integers truncate toward zero (like C).
    """
    if res is None:
        return None
    if isinstance(res, DeviceBuffer):
        res.copy_from(_divide(res.numpy(), n, dt))
        return res
    if dt.name == "bf16":
        res[...] = _dtypes.float32_to_bf16_bits(_dtypes.bf16_bits_to_float32(res) / np.float32(n))
    elif dt.is_float:
        np.divide(res, res.dtype.type(n), out=res)
    else:
        q = res // n
        if dt.numpy.kind == "i":
            q += ((res % n) != 0) & (res < 0)  # floor -> toward zero for negative sums
        res[...] = q
    return res

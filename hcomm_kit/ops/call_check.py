"""The collective-call check of a loaded operator (emulator extension ``HcommKitCallCheck``).

Every rank of a communicator makes the same collective calls in the same order; the emulator
compares each rank's k-th call description with the others' and fails every rank's call before
data moves when they differ. Each call also carries its call site (:mod:`hcomm_kit.ops.callsite`):
a difference in site alone is no error (ranks may branch around one collective), but once the
calls differ the report names every call made from different lines since the ranks' last common
one (where a rank skipped a call or made an extra one). A check is
prepared as a *token* (:meth:`CallCheck._post_check`): C strings cached per description, made
either as the first call of the launch sequence (``HcommKitStreamCalls``) or on its own
(:meth:`CallCheck._check_now`). :class:`~hcomm_kit.ops.custom_op.CustomOp` mixes it in; the
built-in collectives (:mod:`hcomm_kit.ops.collectives`) describe their calls and post them
through their operator.
"""

from __future__ import annotations

import ctypes
from typing import Any

from ..base import dtypes as _dtypes
from ..base.errors import CollectiveMismatchError
from . import callsite as _callsite
from .op_errors import MISMATCH_MARK, op_error

__all__ = ["CallCheck"]


class CallCheck:
    """The call-check methods of :class:`~hcomm_kit.ops.custom_op.CustomOp`.

    Uses the operator's ``comm``, ``rt``, ``spec``, ``name``, ``tag`` and its caches
    ``_sig_ptrs`` (C strings of the texts) and ``_sig_cache`` (descriptions by arguments), and
    ``_count_fields`` / ``_peer_topology`` / ``_reduce_ok`` (what the call's description holds)."""

    comm: Any
    rt: Any
    spec: Any
    name: str
    tag: str
    _sig_ptrs: dict
    _sig_cache: dict
    _count_fields: dict
    _rank_local: frozenset
    _peer_topology: bool
    _reduce_ok: bool

    def check_call(self, signature: str, expected: str | None = None, peer: int = -1) -> None:
        """Post this rank's call and compare it with the other ranks' (emulator only; a no-op on CANN).

        Every rank of the communicator makes the same collective calls in the same order; a rank
        whose call differs (operator, count, dtype, reduce op, root) is found by the later of two
        ranks, the communicator is aborted, and every rank's call fails before data moves. The
        call site (the first frame outside hcomm-kit, see :mod:`hcomm_kit.ops.callsite`) is posted too
        (unless ``HCOMM_KIT_CALL_CHECK=loose``; :func:`hcomm_kit.same_call` posts a label): a
        difference in site alone is no error, but when the calls later differ (a rank skipped a
        call: at its next call, a barrier or ``close()``) the report names both sites.
        Point-to-point partners' sites are shown, not compared.

        Args:
            signature: this rank's call, e.g. ``"all_reduce(count=8, dtype=fp32, op=sum)"``.
            expected: what the other rank(s) must have posted (default: ``signature``).
            peer: -1 for a collective of every rank, else the partner of a point-to-point call.

        Raises:
            CollectiveMismatchError: the calls differ (the message shows each rank's call).
        """
        self._check_now(self._post_check(signature, expected, peer))

    def _post_check(self, signature: str, expected: str | None = None, peer: int = -1) -> tuple | None:
        """The call check of :meth:`check_call`, not made yet: a token for :meth:`_submit`, which
        makes it as the first call of the launch sequence (HcommKitStreamCalls), or for
        :meth:`_check_now`; None when there is nothing to check (CANN, one rank)."""
        comm = self.comm
        if comm._call_check is None or comm.size == 1:
            return None
        where = _callsite.site() if comm._call_sites else ""
        sig = self._site_text(signature, where)
        exp = None
        if expected is not None:
            exp = self._sig_ptrs.get((expected, None)) or self._c_text((expected, None), expected)
        return (sig, exp, peer, signature, where)

    def _site_text(self, signature: str, where: str) -> tuple:
        """The posted text of ``signature`` called at ``where`` as a cached C string (:meth:`_c_text`)."""
        # both strings come from caches: their hashes are known
        return self._sig_ptrs.get((signature, where)) or self._c_text(
            (signature, where), signature + _callsite.SEPARATOR + where if where else signature)

    def _c_text(self, key: tuple, text: str) -> tuple:
        """``text`` as a C string kept alive in the call-check cache: (c_char_p, address)."""
        ptrs = self._sig_ptrs
        if len(ptrs) >= 512:
            ptrs.clear()
        raw = ctypes.c_char_p(text.encode())
        entry = ptrs[key] = (raw, ctypes.cast(raw, ctypes.c_void_p).value)
        return entry

    def _check_now(self, token: tuple | None) -> None:
        """Make the call check of ``token`` (:meth:`_post_check`) on its own."""
        if token is None:
            return
        comm = self.comm
        sig, exp, peer = token[0][0], token[1][0] if token[1] is not None else token[0][0], token[2]
        ret = comm._call_check(comm.handle, peer, sig, exp, comm._check_buf, len(comm._check_buf))
        if ret:
            text = comm._check_buf.value.decode(errors="replace") or self.rt.recent_error_message() or ""
            raise self._check_error(token, ret, text, None)

    def _check_error(self, token: tuple, ret: int, text: str, timeout: float | None) -> Exception:
        """The exception of a failed call check (HcclResult ``ret``, the runtime's ``text``): the
        calls differed (CollectiveMismatchError), or another rank's failure had aborted the
        communicator (RemoteError, naming that rank and its reason)."""
        if MISMATCH_MARK in text:
            return self._mismatch(token, text)
        return op_error(self, ret, "HcommKitCallCheck", timeout, hccl=True, message=text)

    def _mismatch(self, token: tuple, text: str) -> CollectiveMismatchError:
        signature, where = token[3], token[4]
        return CollectiveMismatchError(f"rank {self.comm.rank}: {text}",
                                       call=f"{signature} at {where}" if where else signature)

    def _check_custom_call(self, n: int, dt, rop: int, root: int, params: dict) -> tuple | None:
        """The call check of ``op(...)``: operator, dtype and reduce op; with ``[io] same_args`` (the
        default) also count, root and parameters. Returns its token (:meth:`_post_check`)."""
        if self._count_fields:  # alltoallv: the counts differ per rank by design (as comm.all_to_all_v's check)
            params = {k: v for k, v in params.items() if k not in self._count_fields.values()}
            n = -1
        if params and self._rank_local:  # addresses in each rank's own memory differ by design
            params = {k: v for k, v in params.items() if k not in self._rank_local}
        key = (n, dt.value, rop, root, repr(sorted(params.items())) if params else "")
        sig = self._sig_cache.get(key)
        if sig is None:
            rname = _dtypes.get_reduce_op(rop).name if self._reduce_ok else "-"
            if self.spec.same_args and self._peer_topology:
                extra = f", count={n}"  # root names the partner, parameters may say the direction
            elif self.spec.same_args and n < 0:
                extra = f", root={root}" + (f", params={key[4]}" if params else "")
            elif self.spec.same_args:
                extra = f", count={n}, root={root}" + (f", params={key[4]}" if params else "")
            else:
                extra = ""
            sig = f"{self.name}[{self.tag}](dtype={dt.name}, reduce_op={rname}{extra})"
            if len(self._sig_cache) < 64:
                self._sig_cache[key] = sig
        if self._peer_topology:  # a point-to-point operator: only the pair calls it
            return self._post_check(sig, peer=root)
        return self._post_check(sig)

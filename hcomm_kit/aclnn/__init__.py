"""Operators through CANN's two-phase aclnn interface, from Python.

``load(opdir)`` builds an operator's aclnn host library and registers it; ``invoke(name, x, ...)``
runs ``aclnn<Name>GetWorkspaceSize`` then ``aclnn<Name>`` on a stream with a workspace from the
device's pool and returns a :class:`Work`. See :mod:`.invoker` and :mod:`.pool`.
"""

from .invoker import AclnnOp, DeviceView, Work, get_op, invoke, load, registered
from .meta import MetaApi, TensorDesc, meta_api
from .pool import StreamPool, WorkspacePool, close_pools, stream_pool, workspace_pool

__all__ = ["AclnnOp", "DeviceView", "Work", "get_op", "invoke", "load", "registered", "MetaApi", "TensorDesc", "meta_api",
           "StreamPool", "WorkspacePool", "close_pools", "stream_pool", "workspace_pool"]

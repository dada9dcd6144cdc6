"""Name checks shared by ``hcomm-kit new`` and the op.toml loader.

Operator, kernel and parameter names end up as C identifiers, macro prefixes, file names and a
Python test module, so they must be valid C identifiers, not C/C++ keywords, not reserved
(``__x``, ``_X``) and not clash with symbols the generated code or the Hcomm/HCCL/ACL headers
define. Every check raises :class:`~hcomm_kit.base.errors.ConfigError` with the offending value,
the reason and a fix.
"""

from __future__ import annotations

import functools
import keyword
import re
from pathlib import Path

from ..base.errors import ConfigError

__all__ = [
    "C_KEYWORDS",
    "GENERATED_SYMBOLS",
    "check_identifier",
    "check_op_name",
    "check_kernel_name",
    "api_symbols",
    "default_kernel_name",
]

_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_NAME_LENGTH = 64

# C11 and C++17 keywords, alternative operator tokens, and a few identifiers that are
# effectively reserved in this code (main, std, NULL, nullptr-like macros).
C_KEYWORDS = frozenset(
    """
    auto break case char const continue default do double else enum extern float for goto if
    inline int long register restrict return short signed sizeof static struct switch typedef
    union unsigned void volatile while _Alignas _Alignof _Atomic _Bool _Complex _Generic
    _Imaginary _Noreturn _Static_assert _Thread_local
    alignas alignof and and_eq asm bitand bitor bool catch char8_t char16_t char32_t class compl
    concept consteval constexpr constinit const_cast co_await co_return co_yield decltype delete
    dynamic_cast explicit export false friend mutable namespace new noexcept not not_eq nullptr
    operator or or_eq private protected public reinterpret_cast requires static_assert
    static_cast template this thread_local throw true try typeid typename using virtual wchar_t
    xor xor_eq
    main std NULL
    """.split()
)

# Types, functions and constants the generated files define (see templates/op/inc/param.h.jinja
# and friends). An operator or parameter with one of these names would not compile.
GENERATED_SYMBOLS = frozenset(
    """
    CommBuffer ChannelInfo AlgResourceCtx OpParam ExecOp SIZE_TABLE OpDataTypeSize DeviceType
    DEVICE_TYPE_A2 DEVICE_TYPE_A3 DEVICE_TYPE_A5 OP_LOG_ERROR OP_LOG_WARN OP_LOG_INFO OP_CHECK
    OP_FILE_NAME
    """.split()
)

_API_DECL_RES = (
    re.compile(r"\b([A-Za-z_]\w*)\s*\("),  # function names (and macro calls)
    re.compile(r"#\s*define\s+([A-Za-z_]\w*)"),  # macros
    re.compile(r"}\s*([A-Za-z_]\w*)\s*;"),  # typedef'd struct/enum names
    re.compile(r"typedef\s+[^;{}]*?\b([A-Za-z_]\w*)\s*;"),  # plain typedefs
    re.compile(r"^\s*([A-Za-z_]\w*)\s*(?:=[^,}]*)?,?\s*(?:/[*/].*)?$", re.MULTILINE),  # enumerators
)


@functools.lru_cache(maxsize=1)
def api_symbols() -> frozenset[str]:
    """Identifiers declared by the emulator's public headers (the real CANN API surface).

    Functions, macros, typedef names and enumerators; C keywords and words from comments that
    merely look like identifiers are excluded as well as a regex can.
    """
    from ..base.resources import emu_dir

    names: set[str] = set()
    for header in sorted((emu_dir() / "include").rglob("*.h")):
        text = header.read_text(errors="replace")
        text = re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
        text = re.sub(r"//[^\n]*", " ", text)
        for rx in _API_DECL_RES:
            names.update(rx.findall(text))
    return frozenset(n for n in names if n not in C_KEYWORDS and len(n) > 2)


def _fail(value: str, reason: str, key: str, path: str | Path | None) -> ConfigError:
    return ConfigError(f"{value!r} {reason}", key=key, path=path)


def check_identifier(value: object, *, key: str, what: str, path: str | Path | None = None) -> str:
    """Check that ``value`` can be used as a C and Python identifier.

    Args:
        value: the candidate name.
        key: the option or op.toml key it came from (for the message).
        what: what it names ("operator name", "parameter name", ...).
        path: the file it came from, if any.

    Returns:
        The name.

    Raises:
        ConfigError: not a string, not an identifier, a keyword, or reserved.
    """
    if not isinstance(value, str):
        raise ConfigError(f"the {what} must be a string, got {value!r}", key=key, path=path)
    if not _IDENT_RE.match(value):
        fixed = re.sub(r"[^A-Za-z0-9_]", "_", value)
        if fixed and fixed[0].isdigit():
            fixed = "op_" + fixed
        hint = f"; e.g. {fixed!r}" if fixed and _IDENT_RE.match(fixed) else ""
        raise _fail(value, f"is not a valid C identifier for the {what}: use letters, digits and "
                    f"underscores, not starting with a digit{hint}", key, path)
    if len(value) > MAX_NAME_LENGTH:
        raise _fail(value, f"is too long for the {what} ({len(value)} characters, at most "
                    f"{MAX_NAME_LENGTH})", key, path)
    if value in C_KEYWORDS or keyword.iskeyword(value):
        raise _fail(value, f"is a C/C++ or Python keyword and cannot be the {what}; "
                    f"pick another name, e.g. {value + '_op'!r}", key, path)
    if value.startswith("__") or (value.startswith("_") and value[1:2].isupper()):
        raise _fail(value, f"is a reserved C identifier (leading '__' or '_' + capital) and cannot "
                    f"be the {what}", key, path)
    return value


def check_op_name(name: object, *, key: str = "op.name", path: str | Path | None = None) -> str:
    """Check an operator name: an identifier that does not clash with generated or API symbols.

    The name is used for ``inc/<name>_param.h``, ``namespace ops_<name>``, the ``<NAME>_*``
    macros, ``lib<name>_aicpu_kernel.so`` and ``tests/test_<name>.py``.
    """
    name = check_identifier(name, key=key, what="operator name", path=path)
    if name in GENERATED_SYMBOLS:
        raise _fail(name, "clashes with a type or function of the generated code "
                    f"({', '.join(sorted(GENERATED_SYMBOLS)[:6])}, ...); pick another name", key, path)
    api = api_symbols()
    if name in api:
        raise _fail(name, "clashes with a symbol of the Hcomm/HCCL/ACL headers; pick another name",
                    key, path)
    clashing = sorted(m for m in macro_names(name) if m in api)
    if clashing:
        raise _fail(name, f"would generate macro(s) {', '.join(clashing)} that clash with the "
                    "Hcomm/HCCL/ACL headers; pick another name", key, path)
    return name


def check_kernel_name(kernel: object, *, key: str = "op.kernel", path: str | Path | None = None) -> str:
    """Check the kernel entry symbol (= op-info key = ``functionName``)."""
    kernel = check_identifier(kernel, key=key, what="kernel function name", path=path)
    if kernel in GENERATED_SYMBOLS or kernel in api_symbols():
        raise _fail(kernel, "clashes with a symbol of the generated code or the Hcomm/HCCL/ACL "
                    "headers; the kernel entry must have a name of its own, e.g. "
                    "'HcclLaunchMyOpAicpuKernel'", key, path)
    return kernel


def macro_names(name: str) -> list[str]:
    """The ``<NAME>_*`` macros the generated header defines for operator ``name``."""
    up = name.upper()
    return [f"{up}_{suffix}" for suffix in MACRO_SUFFIXES] + [f"OPS_{up}_PARAM_H", f"OPS_{up}_LOG_H",
                                                             f"OPS_{up}_EXEC_OP_H"]


MACRO_SUFFIXES = (
    "MAX_THREADS", "MAX_CHANNELS", "THREAD_NOTIFY_GO", "THREAD_NOTIFY_BASE", "THREAD_NOTIFY_NUM",
    "ACL_NOTIFY_GO", "ACL_NOTIFY_DONE", "CHANNEL_NOTIFY_ACK", "CHANNEL_NOTIFY_DATA",
    "CHANNEL_NOTIFY_NUM", "NOTIFY_TIMEOUT_DEFAULT",
)


def default_kernel_name(name: str) -> str:
    """``my_allgather`` -> ``HcclMyAllgatherAicpuKernel`` (CANN's naming, e.g. HcclLaunchP2PAicpuKernel)."""
    camel = "".join(part[:1].upper() + part[1:] for part in name.split("_") if part)
    return f"Hccl{camel}AicpuKernel"

"""How compiled entries are called from Python: the object-layout probe and the METH_FASTCALL builtin.

The native entry point takes four Python objects: the tuple of argument arrays, the tuple of
fresh output arrays, the arena array and the tuple of constant arrays, and reads their data
pointers itself. The CPython tuple and NumPy array layouts it relies on are probed once at import
(`OBJECT_ABI`); where they differ, a slower pointer-array convention is used. On standard CPython
builds the entry is wrapped as a METH_FASTCALL builtin (`call_abi`), else called through ctypes.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from typing import Any

import numpy as np

from ..jit import LIGHT_PIPELINE_MARK, compile_ir

__all__ = ["OBJECT_ABI", "ARRAY_DATA_OFFSET", "TUPLE_ITEMS_OFFSET", "call_abi", "fastcall_builtin"]


def _probe_layout() -> tuple[bool, int, int]:
    """Check the CPython tuple and NumPy array layouts the native entry reads."""
    try:
        a = np.zeros(3)
        t = (a, a)
        data_off = 16  # PyArrayObject_fields.data follows PyObject_HEAD
        items_off = tuple.__basicsize__  # PyTupleObject.ob_item follows the variable-size header
        ok = ctypes.c_void_p.from_address(id(a) + data_off).value == a.ctypes.data
        ok = ok and ctypes.c_void_p.from_address(id(t) + items_off).value == id(a)
        ok = ok and ctypes.c_void_p.from_address(id(t) + items_off + 8).value == id(a)
        return ok, data_off, items_off
    except Exception:  # noqa: BLE001
        return False, 16, 24


#: Whether the entry reads Python objects directly (else it takes pointer arrays).
OBJECT_ABI, ARRAY_DATA_OFFSET, TUPLE_ITEMS_OFFSET = _probe_layout()

METH_FASTCALL = 0x0080


class _PyMethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p), ("ml_flags", ctypes.c_int),
                ("ml_doc", ctypes.c_char_p)]


_abi: str | None = None
_abi_lock = threading.Lock()


def fastcall_builtin(address: int, name: str = "symgraph_entry") -> tuple[Any, tuple]:
    """Wrap a native `PyObject* f(PyObject* self, PyObject* const* args, Py_ssize_t n)` as a builtin.

    Returns:
        (callable, keep-alive objects): the method definition and `self` must outlive the callable.
    """
    md = _PyMethodDef(name.encode(), address, METH_FASTCALL, None)
    new = ctypes.pythonapi.PyCFunction_NewEx
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.POINTER(_PyMethodDef), ctypes.py_object, ctypes.py_object]
    selfobj: list = []  # an ordinary (never immortal) object the entry returns with a new reference
    fn = new(ctypes.byref(md), selfobj, None)
    return fn, (md, selfobj)


def call_abi() -> str:
    """How compiled entries are called: "fastcall" (a builtin function, the fastest), "ctypes" or "pointers".

    "fastcall" wraps the native entry in a METH_FASTCALL builtin (no ctypes
    conversion per call; the entry releases the GIL itself for long work). It
    is used on standard CPython builds after a probe call; otherwise ctypes
    calls the entry (and releases the GIL).
    """
    global _abi
    if _abi is not None:
        return _abi
    with _abi_lock:
        if _abi is not None:
            return _abi
        abi = "ctypes" if OBJECT_ABI else "pointers"
        ok_build = (sys.implementation.name == "cpython" and (3, 8) <= sys.version_info[:2] <= (3, 13)
                    and not _free_threaded() and not hasattr(sys, "gettotalrefcount")
                    and not os.environ.get("SYMGRAPH_NO_FASTCALL"))
        if OBJECT_ABI and ok_build:
            try:
                if _fastcall_probe():
                    abi = "fastcall"
            except Exception:  # noqa: BLE001  (any doubt: stay with ctypes)
                pass
        _abi = abi
        return abi


def _free_threaded() -> bool:
    """Whether this is a free-threaded CPython build (3.13+; computing sysconfig's variables costs ~1 ms)."""
    if sys.version_info < (3, 13):
        return False
    import sysconfig

    return bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def _fastcall_probe() -> bool:
    """Whether a native `PyObject* f(self, args, n)` returning a new reference to `self` works as a builtin.

    The entry's own reference counting is a 64-bit add at offset 0 of the
    object, so that layout is checked against `sys.getrefcount` first. The
    call is then made through C-API's `Py_NewRef` (same C calling convention
    as the generated entry, which ignores the extra arguments here); where the
    C-API has no such symbol (CPython < 3.10) a compiled probe is called.
    """
    obj: list = []
    if ctypes.c_ssize_t.from_address(id(obj)).value != sys.getrefcount(obj) - 1:
        return False
    try:
        address = ctypes.cast(ctypes.pythonapi.Py_NewRef, ctypes.c_void_p).value
        keep_code: Any = None
    except AttributeError:
        text = (LIGHT_PIPELINE_MARK + 'define ptr @"entry"(ptr %self, ptr %argv, i64 %n) {\n'
                '  %rc = load i64, ptr %self\n  %rc2 = add i64 %rc, 1\n  store i64 %rc2, ptr %self\n'
                '  ret ptr %self\n}\n')
        keep_code = compile_ir(text)
        address = keep_code.address
    fn, keep = fastcall_builtin(address)
    before = sys.getrefcount(keep[1])
    r = fn((), (), None, ())
    ok = r is keep[1]
    del r
    return ok and sys.getrefcount(keep[1]) == before

/* _hk_fastcall: the steady state of a repeated all_reduce on the same device buffers, compiled.
 *
 * hcomm_kit/ops/call_plans.py keeps, per (buffers, op, async_op), a FastPlan: the call check's
 * text, the cached argument block of HcommKitStreamCalls and what must still hold for it to be
 * valid. PlannedCalls._run_fast runs it from Python (argument key, plan look-up, call site of the
 * call check, one ctypes call: about 1.5 us between two calls of a loop). This module does the same
 * steps with the C API and calls HcommKitStreamCalls through its address with the GIL released.
 * Whatever is not the steady state (no plan yet, a new call site, a same_call() label, a changed
 * operator argument block, a closed communicator, a pending async call) returns None and the
 * Python path handles it, so both paths keep one behaviour.
 *
 * A loop calls with the same objects each time, so the last call's look-ups are remembered (Memo):
 * the plan found for (comm, x, out, op, async_op), valid while those objects are alive (weak
 * references), the buffers' ptr/capacity/dtype/shape are the same objects (read at their slots'
 * offsets) and the plans were not changed since (forget()); and the frames walked to the call site.
 *
 * try_all_reduce(comm, x, out, op, async_op) -> None | int (HcommKitStreamCalls' return code)
 * try_all_reduce_host(comm, x, op, out) -> None | ndarray | int | (int,): a small host array's blocking
 *   all_reduce through its device pair (PlannedCalls._small_host), the same steady state in between.
 * setup_host(numpy.ndarray, numpy.empty) once, from call_plans.py.
 * setup(DeviceBuffer, internal_code_ids, sites, override_var) once, from call_plans.py.
 * forget(): CollectiveOps._fast changed (a plan made, replaced or dropped: PlannedCalls._keep_fast).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

#include <structmember.h>

#include <cstddef>
#include <cstdint>

namespace {

using StreamCallsFn = int32_t (*)(void*, void*, uint32_t, uint32_t, uint32_t*);
using MemcpyFn = int32_t (*)(void*, size_t, const void*, size_t, int32_t); /* aclrtMemcpy */
constexpr int32_t kH2D = 1, kD2H = 2;                                       /* aclrtMemcpyKind */
constexpr uint32_t kCalls = 5; /* entries of an operator's HcommKitStreamCalls array (launch_seq.py N_CALLS) */

struct State {
    PyObject* device_buffer = nullptr;  /* hcomm_kit.core.device.DeviceBuffer */
    PyObject* internal = nullptr;       /* callsite._INTERNAL: ids of hcomm-kit / library code objects */
    PyObject* sites = nullptr;          /* callsite._SITES: (id(code), f_lasti) -> (code, "file:line") */
    PyObject* override_var = nullptr;   /* callsite._OVERRIDE (same_call) */
    unsigned long long handled = 0;     /* calls made here (tests read it) */
    unsigned long long handled_host = 0; /* ... of them, host arrays' (try_all_reduce_host) */
    Py_ssize_t buf_off[4] = {-1, -1, -1, -1}; /* DeviceBuffer's ptr, capacity, dtype, shape slots */
    unsigned long long gen = 1;         /* bumped by forget() */
    PyObject* ndarray = nullptr;        /* numpy.ndarray (setup_host) */
    PyObject* np_empty = nullptr;       /* numpy.empty */
};
State g;

/* The last plan look-up: valid while gen is unchanged, comm/x/out are the same live objects and
 * their slots hold the same objects (vals). Strong references except the weak ones. */
struct Memo {
    unsigned long long gen = 0;
    PyObject *comm_w = nullptr, *x_w = nullptr, *out_w = nullptr; /* weak references */
    PyObject *op = nullptr, *async_op = nullptr, *plan = nullptr;
    PyObject* vals[8] = {};
};
Memo m;

/* The last call-site walk: the frames' code objects (internal ones, then the user's unless the walk
 * reached the outermost frame: no site, ""), the user frame's instruction and the text found. */
constexpr int kMaxWalk = 24;
struct SiteMemo {
    int n = 0;                 /* codes[0..n-1] */
    bool top = false;          /* all n frames are internal and the n-th is the outermost */
    PyObject* codes[kMaxWalk] = {};
    int lasti = -1;            /* instruction of the user frame codes[n-1] (top: unused) */
    PyObject* text = nullptr;
};
SiteMemo sm;

PyObject* weak_target(PyObject* wr) { /* borrowed; nullptr when dead or none */
    if (!wr) return nullptr;
#if PY_VERSION_HEX >= 0x030D0000
    PyObject* o = nullptr;
    if (PyWeakref_GetRef(wr, &o) <= 0) {
        PyErr_Clear();
        return nullptr;
    }
    Py_DECREF(o); /* still referenced by the caller's argument */
    return o;
#else
    PyObject* o = PyWeakref_GetObject(wr);
    return o == Py_None ? nullptr : o;
#endif
}

PyObject* slot(PyObject* o, int i) { return *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(o) + g.buf_off[i]); }

void memo_clear() {
    Py_CLEAR(m.comm_w);
    Py_CLEAR(m.x_w);
    Py_CLEAR(m.out_w);
    Py_CLEAR(m.op);
    Py_CLEAR(m.async_op);
    Py_CLEAR(m.plan);
    for (auto& v : m.vals) Py_CLEAR(v);
    m.gen = 0;
}

/* The remembered plan for this call (borrowed), or nullptr. */
PyObject* memo_plan(PyObject* comm, PyObject* x, PyObject* out, PyObject* op, PyObject* async_op) {
    if (m.gen != g.gen || op != m.op || async_op != m.async_op || weak_target(m.comm_w) != comm ||
        weak_target(m.x_w) != x || weak_target(m.out_w) != out)
        return nullptr;
    for (int i = 0; i < 4; i++)
        if (slot(x, i) != m.vals[i] || slot(out, i) != m.vals[4 + i]) return nullptr;
    return m.plan;
}

void memo_set(PyObject* comm, PyObject* x, PyObject* out, PyObject* op, PyObject* async_op, PyObject* plan) {
    memo_clear();
    if (g.buf_off[0] < 0) return;
    m.comm_w = PyWeakref_NewRef(comm, nullptr);
    m.x_w = m.comm_w ? PyWeakref_NewRef(x, nullptr) : nullptr;
    m.out_w = m.x_w ? PyWeakref_NewRef(out, nullptr) : nullptr;
    if (!m.out_w) {
        PyErr_Clear();
        memo_clear();
        return;
    }
    for (int i = 0; i < 4; i++) {
        m.vals[i] = slot(x, i);
        m.vals[4 + i] = slot(out, i);
        Py_XINCREF(m.vals[i]);
        Py_XINCREF(m.vals[4 + i]);
    }
    Py_INCREF(op);
    Py_INCREF(async_op);
    Py_INCREF(plan);
    m.op = op;
    m.async_op = async_op;
    m.plan = plan;
    m.gen = g.gen;
}

/* Interned attribute names. */
PyObject *s_ptr, *s_capacity, *s_dtype, *s_value, *s_shape, *s_fast, *s_closed, *s_call_sites, *s_op, *s_last_key,
    *s_op_last_key, *s_pending, *s_sig, *s_where, *s_shadow, *s_text, *s_cargs, *s_host_stage;

bool intern_names() {
    struct {
        PyObject** slot;
        const char* text;
    } names[] = {{&s_ptr, "ptr"},       {&s_capacity, "capacity"},     {&s_dtype, "dtype"},   {&s_value, "value"},
                 {&s_shape, "shape"},   {&s_fast, "_fast"},           {&s_closed, "_closed"}, {&s_call_sites, "_call_sites"},
                 {&s_op, "op"},         {&s_last_key, "last_key"},     {&s_op_last_key, "_last_key"},     {&s_pending, "_pending"}, {&s_sig, "sig"},
                 {&s_where, "where"},   {&s_shadow, "shadow"},         {&s_text, "text"},     {&s_cargs, "cargs"},
                 {&s_host_stage, "_host_stage"}};
    for (auto& n : names)
        if (!(*n.slot = PyUnicode_InternFromString(n.text))) return false;
    return true;
}

/* A new reference to attribute `name` of `o`, or nullptr (error cleared: the caller falls back). */
PyObject* attr(PyObject* o, PyObject* name) {
    PyObject* v = PyObject_GetAttr(o, name);
    if (!v) PyErr_Clear();
    return v;
}

/* Owns one reference. */
struct Ref {
    PyObject* p;
    explicit Ref(PyObject* o = nullptr) : p(o) {}
    ~Ref() { Py_XDECREF(p); }
    Ref(const Ref&) = delete;
    Ref& operator=(const Ref&) = delete;
    explicit operator bool() const { return p != nullptr; }
};

/* (x.ptr, x.capacity, x.dtype.value, x.shape, out.ptr, out.capacity, out.dtype.value, op, async_op):
 * the key of CollectiveOps.all_reduce's fast plans. */
PyObject* plan_key(PyObject* x, PyObject* out, PyObject* op, PyObject* async_op) {
    PyObject* key = PyTuple_New(9);
    if (!key) return nullptr;
    PyObject* bufs[2] = {x, out};
    int at[2] = {0, 4};
    for (int b = 0; b < 2; b++) {
        PyObject* ptr = attr(bufs[b], s_ptr);
        PyObject* cap = ptr ? attr(bufs[b], s_capacity) : nullptr;
        Ref dt(cap ? attr(bufs[b], s_dtype) : nullptr);
        PyObject* val = dt ? attr(dt.p, s_value) : nullptr;
        PyObject* shape = (val && b == 0) ? attr(bufs[b], s_shape) : nullptr;
        if (!val || (b == 0 && !shape)) {
            Py_XDECREF(ptr);
            Py_XDECREF(cap);
            Py_XDECREF(val);
            Py_DECREF(key);
            return nullptr;
        }
        PyTuple_SET_ITEM(key, at[b], ptr);
        PyTuple_SET_ITEM(key, at[b] + 1, cap);
        PyTuple_SET_ITEM(key, at[b] + 2, val);
        if (b == 0) PyTuple_SET_ITEM(key, 3, shape);
    }
    Py_INCREF(op);
    Py_INCREF(async_op);
    PyTuple_SET_ITEM(key, 7, op);
    PyTuple_SET_ITEM(key, 8, async_op);
    return key;
}

/* callsite.site() for a call made from the Python frame running now (all_reduce): the first frame
 * outside hcomm-kit, torch and the standard library whose site the Python side already classified,
 * or "" when every frame is one of those (as site() says). A new reference to its text, or nullptr
 * (not known yet, or a same_call() label: Python decides). */
PyObject* known_site() {
    PyObject* label = nullptr;
    if (PyContextVar_Get(g.override_var, nullptr, &label) < 0) {
        PyErr_Clear();
        return nullptr;
    }
    bool labelled = label && label != Py_None;
    Py_XDECREF(label);
    if (labelled) return nullptr;
    PyFrameObject* f = PyEval_GetFrame(); /* borrowed */
    if (!f) return nullptr;
    /* The same frames as the last walk: its text (whether a code is internal never changes, and the
     * site of a code's instruction is computed once: callsite.py). */
    if (sm.text) {
        PyFrameObject* w = f;
        Py_INCREF(w);
        bool same = true;
        for (int i = 0; i < sm.n && same; i++) {
            PyCodeObject* code = w ? PyFrame_GetCode(w) : nullptr;
            same = code && reinterpret_cast<PyObject*>(code) == sm.codes[i] &&
                   (sm.top || i < sm.n - 1 || PyFrame_GetLasti(w) == sm.lasti);
            Py_XDECREF(code);
            if (same && (sm.top || i < sm.n - 1)) {
                PyFrameObject* back = PyFrame_GetBack(w);
                Py_DECREF(w);
                w = back;
            }
        }
        same = same && (!sm.top || !w);
        Py_XDECREF(w);
        if (same) {
            Py_INCREF(sm.text);
            return sm.text;
        }
    }
    Py_INCREF(f);
    PyObject* text = nullptr;
    PyObject* walked[kMaxWalk]; /* the frames' code objects (references) */
    int n = 0, lasti = -1;
    bool top = false;
    for (int depth = 0; depth < 64; depth++) {
        if (!f) { /* every frame was internal: no site */
            text = PyUnicode_New(0, 0);
            top = true;
            break;
        }
        PyCodeObject* code = PyFrame_GetCode(f);
        if (n < kMaxWalk) walked[n] = reinterpret_cast<PyObject*>(code);
        n++;
        Ref id(PyLong_FromVoidPtr(code));
        int internal = id ? PySet_Contains(g.internal, id.p) : -1;
        if (internal == 0) {
            lasti = PyFrame_GetLasti(f);
            Ref lasti_o(PyLong_FromLong(lasti));
            Ref key(lasti_o ? PyTuple_Pack(2, id.p, lasti_o.p) : nullptr);
            PyObject* hit = key ? PyDict_GetItemWithError(g.sites, key.p) : nullptr; /* borrowed */
            if (hit && PyTuple_Check(hit) && PyTuple_GET_SIZE(hit) == 2 &&
                PyTuple_GET_ITEM(hit, 0) == reinterpret_cast<PyObject*>(code)) {
                text = PyTuple_GET_ITEM(hit, 1);
                Py_INCREF(text);
            }
        }
        if (n > kMaxWalk) Py_DECREF(code);
        if (internal != 1) break;
        PyFrameObject* back = PyFrame_GetBack(f);
        Py_DECREF(f);
        f = back;
    }
    Py_XDECREF(f);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        Py_CLEAR(text);
    }
    int kept = n < kMaxWalk ? n : kMaxWalk;
    if (text && n <= kMaxWalk) { /* remember this walk (it holds the code objects) */
        for (int i = 0; i < sm.n; i++) Py_CLEAR(sm.codes[i]);
        Py_XSETREF(sm.text, text);
        Py_INCREF(text);
        for (int i = 0; i < n; i++) sm.codes[i] = walked[i];
        sm.n = n;
        sm.top = top;
        sm.lasti = lasti;
    } else {
        for (int i = 0; i < kept; i++) Py_DECREF(walked[i]);
    }
    return text;
}

bool equals_u64(PyObject* list, Py_ssize_t i, unsigned long long want) {
    unsigned long long v = PyLong_AsUnsignedLongLong(PyList_GET_ITEM(list, i));
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return false;
    }
    return v == want;
}

/* The repeated all_reduce of device buffers x -> out from its fast plan: false when it is not the
 * steady state (nothing done), else true with *ret = HcommKitStreamCalls' return code. */
bool run_device(PyObject* comm, PyObject* x, PyObject* out, PyObject* op, PyObject* async_op, int32_t* ret) {
    if (!g.device_buffer || Py_TYPE(x) != reinterpret_cast<PyTypeObject*>(g.device_buffer) ||
        Py_TYPE(out) != reinterpret_cast<PyTypeObject*>(g.device_buffer) || !PyUnicode_CheckExact(op) ||
        async_op == Py_True)
        return false;
    PyObject* plan = memo_plan(comm, x, out, op, async_op); /* borrowed */
    if (!plan) {
        Ref fast(attr(comm, s_fast));
        Ref key(fast ? plan_key(x, out, op, async_op) : nullptr);
        if (!key || !PyDict_CheckExact(fast.p)) return false;
        plan = PyDict_GetItemWithError(fast.p, key.p); /* borrowed */
        if (!plan) {
            PyErr_Clear();
            return false;
        }
        memo_set(comm, x, out, op, async_op, plan);
    }
    Py_INCREF(plan);
    Ref hold(plan);
    /* CollectiveOps._run_fast's conditions for the plan's argument block to be current. */
    Ref closed(attr(comm, s_closed));
    Ref cop(attr(plan, s_op));
    Ref last(attr(plan, s_last_key));
    Ref op_last(cop ? attr(cop.p, s_op_last_key) : nullptr);
    if (!closed || closed.p != Py_False || !last || !op_last || op_last.p != last.p) return false;
    if (async_op == Py_False) {
        Ref pending(attr(cop.p, s_pending));
        if (!pending || pending.p != Py_None) return false;
    }
    Ref cargs(attr(plan, s_cargs)); /* (HcommKitStreamCalls address, stream, calls4, calls3, flags, &failed) */
    if (!cargs || !PyTuple_CheckExact(cargs.p) || PyTuple_GET_SIZE(cargs.p) != 6) return false;
    Ref sig(attr(plan, s_sig));
    if (!sig) return false;
    uint32_t ncalls = kCalls - 1; /* go, launch, done, output (hcomm_kit/ops/launch_seq.py N_CALLS) */
    if (sig.p != Py_None) {
        ncalls = kCalls; /* and the call check first */
        Ref sites_on(attr(comm, s_call_sites));
        if (!sites_on) return false;
        int on = PyObject_IsTrue(sites_on.p);
        if (on < 0) {
            PyErr_Clear();
            return false;
        }
        Ref where(on ? known_site() : nullptr);
        Ref last_where(attr(plan, s_where));
        if (!last_where) return false;
        if (on) {
            if (!where || where.p != last_where.p) return false; /* a new site: Python posts its text */
        } else if (!PyUnicode_Check(last_where.p) || PyUnicode_GET_LENGTH(last_where.p) != 0) {
            return false;
        }
        /* The argument block still holds this site's text, as a collective (expected = signature, peer -1). */
        Ref shadow(attr(plan, s_shadow));
        Ref text(attr(plan, s_text));
        if (!shadow || !text || !PyList_CheckExact(shadow.p) || PyList_GET_SIZE(shadow.p) != 3 ||
            !PyTuple_CheckExact(text.p) || PyTuple_GET_SIZE(text.p) != 2)
            return false;
        unsigned long long addr = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(text.p, 1));
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return false;
        }
        if (!equals_u64(shadow.p, 0, addr) || !equals_u64(shadow.p, 1, 0) || !equals_u64(shadow.p, 2, 0xFFFFFFFFull))
            return false;
    }
    unsigned long long v[6];
    for (int i = 0; i < 6; i++) {
        v[i] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(cargs.p, i));
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return false;
        }
    }
    auto fn = reinterpret_cast<StreamCallsFn>(static_cast<uintptr_t>(v[0]));
    void* calls = reinterpret_cast<void*>(static_cast<uintptr_t>(ncalls == kCalls ? v[2] : v[3]));
    int32_t r;
    Py_BEGIN_ALLOW_THREADS
    r = fn(reinterpret_cast<void*>(static_cast<uintptr_t>(v[1])), calls, ncalls, static_cast<uint32_t>(v[4]),
           reinterpret_cast<uint32_t*>(static_cast<uintptr_t>(v[5])));
    Py_END_ALLOW_THREADS
    g.handled++;
    *ret = r;
    return true;
}

PyObject* try_all_reduce(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "try_all_reduce(comm, x, out, op, async_op)");
        return nullptr;
    }
    int32_t ret = 0;
    if (!run_device(args[0], args[1], args[2], args[3], args[4], &ret)) Py_RETURN_NONE;
    return PyLong_FromLong(ret);
}

/* An unsigned 64-bit attribute or tuple item; false (error cleared) when it is none. */
bool as_u64(PyObject* o, unsigned long long* v) {
    if (!o || !PyLong_Check(o)) return false;
    *v = PyLong_AsUnsignedLongLong(o);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return false;
    }
    return true;
}

/* Holds a Py_buffer while alive (view.obj set: acquired). */
struct Buf {
    Py_buffer view{};
    ~Buf() {
        if (view.obj) PyBuffer_Release(&view);
    }
    bool get(PyObject* o, int flags) {
        if (PyObject_GetBuffer(o, &view, flags) == 0) return true;
        view.obj = nullptr;
        return false;
    }
};

/* `out` (None, or an ndarray of x's shape and dtype) as a writable C-contiguous buffer of nbytes. */
bool out_buffer(PyObject* out, PyObject* shape, PyObject* dtype, unsigned long long nbytes, Buf* b) {
    if (Py_TYPE(out) != reinterpret_cast<PyTypeObject*>(g.ndarray)) return false;
    Ref oshape(attr(out, s_shape));
    Ref odtype(oshape ? attr(out, s_dtype) : nullptr);
    if (!odtype || PyObject_RichCompareBool(oshape.p, shape, Py_EQ) != 1 ||
        PyObject_RichCompareBool(odtype.p, dtype, Py_EQ) != 1 ||
        !b->get(out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) || b->view.len != static_cast<Py_ssize_t>(nbytes)) {
        PyErr_Clear();
        return false;
    }
    return true;
}

/* A blocking all_reduce of a small host array through its device pair (PlannedCalls._small_host:
 * comm._host_stage[(x.dtype, x.shape, op)] = (din, dout, nbytes, aclrtMemcpy address)): x copied
 * into din, the device call's steady state (run_device), then dout copied into out (None: a new
 * array of x's shape and dtype). None when any of it is not the steady state (nothing irreversible
 * done: at most the copy into din, which the Python path makes again); after the collective ran,
 * the result, or the failed call's code (int), or (code,) when the copy back failed. */
PyObject* try_all_reduce_host(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "try_all_reduce_host(comm, x, op, out)");
        return nullptr;
    }
    PyObject *comm = args[0], *x = args[1], *op = args[2], *out = args[3];
    if (!g.ndarray || Py_TYPE(x) != reinterpret_cast<PyTypeObject*>(g.ndarray) || !PyUnicode_CheckExact(op))
        Py_RETURN_NONE;
    Ref stage(attr(comm, s_host_stage));
    Ref dtype(stage ? attr(x, s_dtype) : nullptr);
    Ref shape(dtype ? attr(x, s_shape) : nullptr);
    Ref key(shape ? PyTuple_Pack(3, dtype.p, shape.p, op) : nullptr);
    if (!key || !PyDict_CheckExact(stage.p)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject* pair = PyDict_GetItemWithError(stage.p, key.p); /* borrowed */
    if (!pair || !PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 4) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_INCREF(pair);
    Ref hold(pair);
    PyObject *din = PyTuple_GET_ITEM(pair, 0), *dout = PyTuple_GET_ITEM(pair, 1);
    unsigned long long nbytes = 0, fn_addr = 0, in_ptr = 0, out_ptr = 0;
    Ref din_ptr(attr(din, s_ptr));
    Ref dout_ptr(attr(dout, s_ptr));
    if (!as_u64(PyTuple_GET_ITEM(pair, 2), &nbytes) || !as_u64(PyTuple_GET_ITEM(pair, 3), &fn_addr) ||
        !as_u64(din_ptr.p, &in_ptr) || !as_u64(dout_ptr.p, &out_ptr) || !fn_addr || !in_ptr || !out_ptr)
        Py_RETURN_NONE;
    auto memcpy_fn = reinterpret_cast<MemcpyFn>(static_cast<uintptr_t>(fn_addr));
    Buf outb;
    if (out != Py_None && !out_buffer(out, shape.p, dtype.p, nbytes, &outb)) Py_RETURN_NONE;
    int32_t r = -1;
    {
        Buf xb;
        if (!xb.get(x, PyBUF_C_CONTIGUOUS)) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        if (xb.view.len == static_cast<Py_ssize_t>(nbytes))
            r = memcpy_fn(reinterpret_cast<void*>(static_cast<uintptr_t>(in_ptr)), nbytes, xb.view.buf, nbytes, kH2D);
    }
    int32_t ret = 0;
    if (r != 0 || !run_device(comm, din, dout, op, Py_False, &ret)) Py_RETURN_NONE;
    if (ret != 0) return PyLong_FromLong(ret);
    /* the collective ran: from here on the call is made, never handed back to Python */
    Ref res;
    Buf resb;
    if (out != Py_None) {
        Py_INCREF(out);
        res.p = out;
    } else {
        PyObject* empty_args[2] = {shape.p, dtype.p};
        res.p = PyObject_Vectorcall(g.np_empty, empty_args, 2, nullptr);
        if (!res.p || !resb.get(res.p, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE)) return nullptr;
    }
    Py_buffer& dst = out != Py_None ? outb.view : resb.view;
    r = dst.len == static_cast<Py_ssize_t>(nbytes)
            ? memcpy_fn(dst.buf, nbytes, reinterpret_cast<void*>(static_cast<uintptr_t>(out_ptr)), nbytes, kD2H)
            : -1;
    if (r != 0) return Py_BuildValue("(i)", r);
    g.handled_host++;
    Py_INCREF(res.p);
    return res.p;
}

PyObject* setup_host(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyType_Check(args[0]) || !PyCallable_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "setup_host(numpy.ndarray, numpy.empty)");
        return nullptr;
    }
    Py_INCREF(args[0]);
    Py_XSETREF(g.ndarray, args[0]);
    Py_INCREF(args[1]);
    Py_XSETREF(g.np_empty, args[1]);
    Py_RETURN_NONE;
}


PyObject* setup(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyType_Check(args[0]) || !PySet_Check(args[1]) || !PyDict_Check(args[2]) ||
        !PyContextVar_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError, "setup(DeviceBuffer, internal: set, sites: dict, override: ContextVar)");
        return nullptr;
    }
    PyObject** slots[4] = {&g.device_buffer, &g.internal, &g.sites, &g.override_var};
    for (int i = 0; i < 4; i++) {
        Py_INCREF(args[i]);
        Py_XSETREF(*slots[i], args[i]);
    }
    /* The buffers' slots read directly by the memo: object members (__slots__) of DeviceBuffer. */
    PyObject* names[4] = {s_ptr, s_capacity, s_dtype, s_shape};
    for (int i = 0; i < 4; i++) {
        g.buf_off[i] = -1;
        Ref d(attr(args[0], names[i])); /* on the class: the member descriptor itself */
        if (d && Py_TYPE(d.p) == &PyMemberDescr_Type) {
            PyMemberDef* md = reinterpret_cast<PyMemberDescrObject*>(d.p)->d_member;
            if (md->type == T_OBJECT_EX) g.buf_off[i] = md->offset;
        }
        if (g.buf_off[i] < 0) {
            for (auto& o : g.buf_off) o = -1; /* not slots: no memo, the look-up every call */
            break;
        }
    }
    g.gen++;
    memo_clear();
    Py_RETURN_NONE;
}

PyObject* forget(PyObject*, PyObject*) {
    g.gen++;
    memo_clear();
    Py_RETURN_NONE;
}

PyObject* handled(PyObject*, PyObject*) { return PyLong_FromUnsignedLongLong(g.handled); }
PyObject* handled_host(PyObject*, PyObject*) { return PyLong_FromUnsignedLongLong(g.handled_host); }

PyMethodDef methods[] = {
    {"try_all_reduce", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(try_all_reduce)), METH_FASTCALL,
     "try_all_reduce(comm, x, out, op, async_op): the repeated all_reduce from its fast plan; None when not the steady state"},
    {"try_all_reduce_host", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(try_all_reduce_host)),
     METH_FASTCALL,
     "try_all_reduce_host(comm, x, op, out): a blocking all_reduce of a small host array through its device pair; None "
     "when not the steady state"},
    {"setup_host", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(setup_host)), METH_FASTCALL,
     "setup_host(numpy.ndarray, numpy.empty)"},
    {"setup", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(setup)), METH_FASTCALL,
     "setup(DeviceBuffer, internal, sites, override): the objects of hcomm_kit this module reads"},
    {"handled", handled, METH_NOARGS, "calls made by try_all_reduce (and try_all_reduce_host) in this process"},
    {"handled_host", handled_host, METH_NOARGS, "calls made by try_all_reduce_host in this process"},
    {"forget", forget, METH_NOARGS, "the plans changed: look them up again"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_hk_fastcall", "hcomm-kit: compiled steady state of repeated calls",
                      -1, methods, nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__hk_fastcall(void) {
    if (!intern_names()) return nullptr;
    return PyModule_Create(&module);
}

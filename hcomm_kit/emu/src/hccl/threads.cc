/* HCCL host plane: device threads of a communicator (HcclThreadAcquire and friends; hcomm.md
 * §3.7). */
#include "hccl/comm.h"

#include <climits>
#include <cstring>

using namespace emu;

/* ================================================================ threads */

namespace emu {
int check_thread_engine(int engine, const char* api) {
    switch (engine) {
        case COMM_ENGINE_CPU:
        case COMM_ENGINE_CPU_TS:
        case COMM_ENGINE_AICPU:
        case COMM_ENGINE_AICPU_TS: return 0;
        case COMM_ENGINE_AIV:
        case COMM_ENGINE_CCU:
            return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, api, "engine %s is not emulated (use COMM_ENGINE_AICPU_TS or COMM_ENGINE_CPU_TS)",
                          engine == COMM_ENGINE_AIV ? "COMM_ENGINE_AIV" : "COMM_ENGINE_CCU");
        default: return (HcclResult)seterr(HCCL_E_PARA, api, "engine %d is not a CommEngine value", engine);
    }
}
}  // namespace emu

namespace {
Context* comm_ctx(Comm* c) {
    Context* cur = current_ctx();
    return cur && cur->dev == c->dev ? cur : c->ctx;
}

int acquire_threads(Comm* c, int engine, uint32_t n, uint32_t notify, ThreadHandle* out, const char* api) {
    if (int r = check_thread_engine(engine, api)) return r;
    if (n == 0) return (HcclResult)seterr(HCCL_E_PARA, api, "threadNum is 0");
    if (n > 4096) return (HcclResult)seterr(HCCL_E_PARA, api, "threadNum %u is above the emulator's limit of 4096", n);
    if (notify > 65535) return (HcclResult)seterr(HCCL_E_PARA, api, "notifyNumPerThread %u is above 65535", notify);
    std::lock_guard<std::mutex> g(c->m);
    std::vector<HThread*> made;
    std::vector<Stream*> streams;
    auto undo = [&] {
        for (HThread* t : made) hthread_destroy(t);
        for (Stream* s : streams) stream_destroy(s);
    };
    bool host = engine_side(engine) == Engine::Host;
    for (uint32_t i = 0; i < n; i++) {
        Stream* s = nullptr;
        if (host) {
            int code = 0;
            s = stream_create(comm_ctx(c), 0, &code, api);
            if (!s) {
                std::string m = last_err();
                undo();
                return (HcclResult)seterr(HCCL_E_RUNTIME, api, "cannot create the stream of CPU thread %u: %s", i, m.c_str());
            }
            streams.push_back(s);
        }
        std::string err;
        HThread* t = hthread_create(c->dev, c, notify, host, s, engine, &err);
        if (!t) {
            undo();
            return (HcclResult)seterr(HCCL_E_UNAVAIL, api, "cannot create thread %u of %u (%u notifies each) on device %d: %s", i, n,
                          notify, c->dev->id, err.c_str());
        }
        made.push_back(t);
    }
    for (uint32_t i = 0; i < n; i++) {
        /* Device threads are numbered t0, t1, ... per communicator in acquisition order (so the
         * first HcclThreadAcquire's threads[i] is ti); stream-bound ones go by their stream. */
        if (!host) made[i]->no = c->aicpu_threads++;
        c->threads.push_back(made[i]);
        out[i] = (ThreadHandle)(uintptr_t)thread_view(made[i], engine_side(engine), engine);
    }
    /* internal streams of CPU threads: destroyed by HcclCommDestroy after their threads */
    c->own_streams.insert(c->own_streams.end(), streams.begin(), streams.end());
    return HCCL_SUCCESS;
}
}  // namespace

EMU_API HcclResult HcclThreadAcquire(HcclComm comm, CommEngine engine, uint32_t threadNum, uint32_t notifyNumPerThread,
                                     ThreadHandle* threads) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(threads);
    return (HcclResult)acquire_threads(c, engine, threadNum, notifyNumPerThread, threads, __func__);
}

EMU_API HcclResult HcclThreadAcquireWithConfig(HcclComm comm, CommEngine engine, uint32_t threadNum, ThreadType type,
                                               const ThreadConfig* config, ThreadHandle* threads) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(config);
    NEED_PTR(threads);
    if (type != THREAD_TYPE_TS) return (HcclResult)seterr(HCCL_E_PARA, __func__, "type %d is not THREAD_TYPE_TS (0)", (int)type);
    if (config->header.magicWord != HCOMM_THREAD_CONFIG_MAGIC_WORD || config->header.version != HCOMM_THREAD_CONFIG_VERSION)
        return (HcclResult)seterr(HCCL_E_PARA, __func__,
                      "config header (magic 0x%08x, version %u) is not initialised: call ThreadConfigInit first",
                      config->header.magicWord, config->header.version);
    return (HcclResult)acquire_threads(c, engine, threadNum, config->notifyNumPerThread, threads, __func__);
}

EMU_API HcclResult HcclThreadAcquireWithStream(HcclComm comm, CommEngine engine, aclrtStream stream, uint32_t notifyNum,
                                               ThreadHandle* thread) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(thread);
    if (engine != COMM_ENGINE_CPU && engine != COMM_ENGINE_CPU_TS) {
        if (int r = check_thread_engine(engine, __func__)) return (HcclResult)r;
        return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, __func__,
                      "engine %d cannot wrap a user stream: use COMM_ENGINE_CPU_TS (or COMM_ENGINE_CPU)", (int)engine);
    }
    if (notifyNum > 65535) return (HcclResult)seterr(HCCL_E_PARA, __func__, "notifyNum %u is above 65535", notifyNum);
    int rc = 0;
    Stream* s = comm_stream(c, stream, __func__, &rc);
    if (!s) return (HcclResult)rc;
    std::lock_guard<std::mutex> g(c->m);
    auto key = std::make_pair(s, s->id);
    auto it = c->stream_threads.find(key);
    if (it != c->stream_threads.end() && it->second->nslots >= notifyNum) {
        *thread = (ThreadHandle)(uintptr_t)thread_view(it->second, engine_side(engine), engine);
        return HCCL_SUCCESS;
    }
    std::string err;
    HThread* t = hthread_create(c->dev, c, notifyNum, true, s, engine, &err);
    if (!t)
        return (HcclResult)seterr(HCCL_E_UNAVAIL, __func__, "cannot wrap stream %u as a thread with %u notifies: %s", s->id, notifyNum,
                      err.c_str());
    c->threads.push_back(t);
    c->stream_threads[key] = t;
    *thread = (ThreadHandle)(uintptr_t)thread_view(t, engine_side(engine), engine);
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclThreadExportToCommEngine(HcclComm comm, uint32_t threadNum, const ThreadHandle* threads,
                                                CommEngine dstCommEngine, ThreadHandle* exportedThreads) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(threads);
    NEED_PTR(exportedThreads);
    if (threadNum == 0) return (HcclResult)seterr(HCCL_E_PARA, __func__, "threadNum is 0");
    if (threadNum > (1u << 20)) return (HcclResult)seterr(HCCL_E_PARA, __func__, "threadNum %u is not in (0, 1048576]", threadNum);
    if (int r = check_thread_engine(dstCommEngine, __func__)) return (HcclResult)r;
    std::vector<ThreadHandle> out(threadNum);
    for (uint32_t i = 0; i < threadNum; i++) {
        ThreadView* v = view_from_handle(threads[i]);
        if (!v) return (HcclResult)seterr(HCCL_E_PARA, __func__, "threads[%u] = 0x%llx is not a live thread handle", i,
                              (unsigned long long)threads[i]);
        if (v->t->comm != c)
            return (HcclResult)seterr(HCCL_E_PARA, __func__, "threads[%u] belongs to another communicator (rank %d of %s)", i,
                          v->t->comm ? comm_rank(v->t->comm) : -1, v->t->comm ? comm_name(v->t->comm) : "?");
        out[i] = (ThreadHandle)(uintptr_t)thread_view(v->t, engine_side(dstCommEngine), dstCommEngine);
    }
    memcpy(exportedThreads, out.data(), threadNum * sizeof(ThreadHandle));
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclDedicatedThreadAcquire(HcclComm comm, HcclDedicatedThreadType useType, uint32_t notifyNumPerThread,
                                              ThreadHandle* thread) {
    RESOLVE_COMM(c, comm);
    (void)c;
    (void)notifyNumPerThread;
    (void)thread;
    return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, __func__,
                  "dedicated threads (type %d) are not emulated; use HcclThreadAcquire(COMM_ENGINE_AICPU_TS)", (int)useType);
}

EMU_API HcclResult HcclThreadResGetInfo(HcclComm comm, ThreadHandle thread, ThreadResType resType, uint32_t infoLen,
                                        void** info) {
    RESOLVE_COMM(c, comm);
    (void)c;
    (void)thread;
    (void)infoLen;
    (void)info;
    return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, __func__, "thread resource queries (resType %d) are not emulated", (int)resType);
}

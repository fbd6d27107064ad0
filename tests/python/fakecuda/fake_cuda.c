/*
 * A stand-in CUDA driver library (libcuda.so.1) for machines without a GPU.
 *
 * It implements the driver functions cai calls, with the documented semantics that cai
 * relies on, over ordinary host memory: "device memory" is memory the test registers
 * (or cuMemAlloc_v2 mallocs), streams are handles the test registers on a device,
 * contexts are the devices' primary contexts, events are checked handles. Every call is
 * logged, so that tests can check what cai asked of the driver; any call can be made to
 * fail with a given error code; the number of live events and the thread's current
 * context and capture mode can be read back.
 *
 * The control functions (fake*) are called through ctypes from the tests, on the very
 * library cai loaded (dlopen returns the same handle for the same path).
 *
 * It checks what the real driver checks where a mistake of cai's would matter: an event
 * recorded on a stream of another context, a call that needs a current context without
 * one, unknown or destroyed handles, copies outside an allocation.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct Context *CUcontext;
typedef struct Event *CUevent;
typedef void *CUstream;

enum {
    SUCCESS = 0,
    INVALID_VALUE = 1,
    OUT_OF_MEMORY = 2,
    NOT_INITIALIZED = 3,
    INVALID_DEVICE = 101,
    INVALID_CONTEXT = 201,
    INVALID_HANDLE = 400,
    NOT_FOUND = 500,
    STREAM_CAPTURE_UNSUPPORTED = 900,
    STREAM_CAPTURE_IMPLICIT = 906,
};

#define DEVICES 3
#define MAX_ALLOCATIONS 256
#define MAX_STREAMS 256
#define MAX_FAILURES 16
#define EVENT_MAGIC 0xE7E7E7E7u

struct Context {
    int device;
};

struct Event {
    unsigned magic;
    int id;
    struct Context *context;
};

struct Allocation {
    CUdeviceptr start;
    size_t size;
    int device;
    unsigned kind; /* 1 host (pinned), 2 device */
    int managed;
    int owned; /* made by cuMemAlloc_v2 */
    /* The virtual range the pointer attributes report (0: the allocation itself): for memory
     * mapped through the virtual memory API, the reservation the mapping lies in, while
     * cuMemGetAddressRange reports the mapping alone. */
    CUdeviceptr range_start;
    size_t range_size;
};

struct FakeStream {
    uintptr_t handle;
    int device;
    unsigned capture_status; /* 0 none, 1 active, 2 invalidated */
    unsigned long long capture_id;
    int implicit; /* a blocking stream capturing in global mode: the legacy stream of its
                   * context reports CUDA_ERROR_STREAM_CAPTURE_IMPLICIT */
};

struct Failure {
    char name[64];
    CUresult code;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct Context contexts[DEVICES] = {{0}, {1}, {2}};
static int initialized;
static struct Allocation allocations[MAX_ALLOCATIONS];
static int n_allocations;
static struct FakeStream streams[MAX_STREAMS];
static int n_streams;
static struct Failure failures[MAX_FAILURES];
static int n_failures;
static int live_events;
static int next_event_id;
static char *log_text;
static size_t log_len, log_cap;
static __thread struct Context *current;
/* Whether cuPointerGetAttributes wants a current context, as some drivers do. */
static int pointers_need_context;
static __thread int capture_mode = 0; /* CU_STREAM_CAPTURE_MODE_GLOBAL */

static void logf_locked(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void logf_locked(const char *fmt, ...) {
    char line[512];
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, args);
    va_end(args);
    if (n < 0) return;
    if ((size_t)n > sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    if (log_len + (size_t)n + 1 > log_cap) {
        size_t cap = log_cap ? log_cap * 2 : 4096;
        while (cap < log_len + (size_t)n + 1) cap *= 2;
        char *grown = realloc(log_text, cap);
        if (!grown) return;
        log_text = grown;
        log_cap = cap;
    }
    memcpy(log_text + log_len, line, (size_t)n);
    log_len += (size_t)n;
    log_text[log_len] = 0;
}

#define LOG(...)                         \
    do {                                 \
        pthread_mutex_lock(&lock);       \
        logf_locked(__VA_ARGS__);        \
        pthread_mutex_unlock(&lock);     \
    } while (0)

/* The code the test asked `name` to fail with, or 0. */
static CUresult injected(const char *name) {
    CUresult code = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_failures; i++)
        if (strcmp(failures[i].name, name) == 0) code = failures[i].code;
    pthread_mutex_unlock(&lock);
    return code;
}

#define ENTER(name)                                   \
    do {                                              \
        CUresult injected_code = injected(name);      \
        if (injected_code) return injected_code;      \
        if (!initialized && strcmp(name, "cuInit"))   \
            return NOT_INITIALIZED;                   \
    } while (0)

static const char *context_name(const struct Context *c) {
    static const char *names[DEVICES] = {"ctx0", "ctx1", "ctx2"};
    return c ? names[c->device] : "none";
}

static int valid_device(int device) {
    return device >= 0 && device < DEVICES;
}

static int valid_context(const struct Context *c) {
    return c == &contexts[0] || c == &contexts[1] || c == &contexts[2];
}

static struct FakeStream *find_stream_locked(uintptr_t handle) {
    for (int i = 0; i < n_streams; i++)
        if (streams[i].handle == handle) return &streams[i];
    return NULL;
}

/* The context a stream belongs to: a registered stream's device's, or for the legacy and
 * per-thread default streams (1 and 2) the current one. */
static CUresult stream_context(CUstream stream, struct Context **out) {
    uintptr_t h = (uintptr_t)stream;
    if (h == 0 || h == 1 || h == 2) {
        if (!current) return INVALID_CONTEXT;
        *out = current;
        return SUCCESS;
    }
    pthread_mutex_lock(&lock);
    struct FakeStream *s = find_stream_locked(h);
    int device = s ? s->device : -1;
    pthread_mutex_unlock(&lock);
    if (device < 0) return INVALID_HANDLE;
    *out = &contexts[device];
    return SUCCESS;
}

static int valid_event(const struct Event *e) {
    if (!e) return 0;
    pthread_mutex_lock(&lock);
    int ok = e->magic == EVENT_MAGIC;
    pthread_mutex_unlock(&lock);
    return ok;
}

static struct Allocation *find_allocation_locked(CUdeviceptr p) {
    for (int i = 0; i < n_allocations; i++)
        if (p >= allocations[i].start && p < allocations[i].start + allocations[i].size) return &allocations[i];
    return NULL;
}

static int inside_allocation(CUdeviceptr p, size_t n) {
    pthread_mutex_lock(&lock);
    struct Allocation *a = find_allocation_locked(p);
    int ok = a && (n == 0 || p + n <= a->start + a->size);
    pthread_mutex_unlock(&lock);
    return ok;
}

/* ---- the driver functions ---- */

CUresult cuInit(unsigned int flags) {
    ENTER("cuInit");
    LOG("cuInit flags=%u", flags);
    /* A machine whose driver loads but cannot start (no device, say). */
    const char *fails = getenv("FAKE_CUDA_INIT_FAILS");
    if (fails && *fails) return (CUresult)atoi(fails);
    initialized = 1;
    return SUCCESS;
}

CUresult cuDriverGetVersion(int *version) {
    if (!version) return INVALID_VALUE;
    *version = 12080;
    return SUCCESS;
}

static const char *error_name(CUresult e) {
    switch (e) {
    case SUCCESS: return "CUDA_SUCCESS";
    case INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
    case NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 700: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case STREAM_CAPTURE_IMPLICIT: return "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT";
    default: return NULL;
    }
}

CUresult cuGetErrorName(CUresult e, const char **s) {
    if (!s) return INVALID_VALUE;
    *s = error_name(e);
    return *s ? SUCCESS : INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult e, const char **s) {
    if (!s) return INVALID_VALUE;
    *s = error_name(e) ? "an error of the stand-in driver" : NULL;
    return *s ? SUCCESS : INVALID_VALUE;
}

CUresult cuDeviceGetCount(int *count) {
    ENTER("cuDeviceGetCount");
    if (!count) return INVALID_VALUE;
    *count = DEVICES;
    return SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    ENTER("cuDeviceGet");
    LOG("cuDeviceGet ordinal=%d", ordinal);
    if (!device) return INVALID_VALUE;
    if (!valid_device(ordinal)) return INVALID_DEVICE;
    *device = ordinal;
    return SUCCESS;
}

CUresult cuDeviceGetAttribute(int *value, int attribute, CUdevice device) {
    ENTER("cuDeviceGetAttribute");
    if (!value) return INVALID_VALUE;
    if (!valid_device(device)) return INVALID_DEVICE;
    *value = attribute == 75 ? 9 : attribute == 76 ? 0 : 1; /* compute capability 9.0 */
    return SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
    ENTER("cuDevicePrimaryCtxRetain");
    LOG("cuDevicePrimaryCtxRetain device=%d", device);
    if (!context) return INVALID_VALUE;
    if (!valid_device(device)) return INVALID_DEVICE;
    *context = &contexts[device];
    return SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
    ENTER("cuDevicePrimaryCtxRelease_v2");
    return valid_device(device) ? SUCCESS : INVALID_DEVICE;
}

CUresult cuCtxGetCurrent(CUcontext *context) {
    ENTER("cuCtxGetCurrent");
    if (!context) return INVALID_VALUE;
    *context = current;
    return SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext context) {
    ENTER("cuCtxSetCurrent");
    LOG("cuCtxSetCurrent %s", context_name(context));
    if (context && !valid_context(context)) return INVALID_CONTEXT;
    current = context;
    return SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device) {
    ENTER("cuCtxGetDevice");
    if (!device) return INVALID_VALUE;
    if (!current) return INVALID_CONTEXT;
    *device = current->device;
    return SUCCESS;
}

CUresult cuCtxSynchronize(void) {
    ENTER("cuCtxSynchronize");
    if (!current) return INVALID_CONTEXT;
    /* As the driver: the host may not wait for a whole context while a stream of it
     * captures a graph, and trying invalidates the capture. */
    int capturing = 0;
    pthread_mutex_lock(&lock);
    logf_locked("cuCtxSynchronize %s", context_name(current));
    for (int i = 0; i < n_streams; i++) {
        if (streams[i].capture_status == 1 && &contexts[streams[i].device] == current) {
            streams[i].capture_status = 2;
            capturing = 1;
        }
    }
    pthread_mutex_unlock(&lock);
    return capturing ? STREAM_CAPTURE_UNSUPPORTED : SUCCESS;
}

CUresult cuStreamGetCtx(CUstream stream, CUcontext *context) {
    ENTER("cuStreamGetCtx");
    if (!context) return INVALID_VALUE;
    struct Context *c = NULL;
    CUresult r = stream_context(stream, &c);
    if (r == SUCCESS) *context = c;
    return r;
}

CUresult cuStreamGetCaptureInfo_v2(CUstream stream, unsigned *status, unsigned long long *id, void **graph,
                                   const void ***dependencies, size_t *count) {
    ENTER("cuStreamGetCaptureInfo_v2");
    struct Context *c = NULL;
    CUresult r = stream_context(stream, &c);
    if (r != SUCCESS) return r;
    if (!status) return INVALID_VALUE;
    unsigned st = 0;
    unsigned long long capture = 0;
    int implicit = 0;
    pthread_mutex_lock(&lock);
    struct FakeStream *s = find_stream_locked((uintptr_t)stream);
    if (s) {
        st = s->capture_status;
        capture = s->capture_id;
    } else if ((uintptr_t)stream == 1) {
        /* The legacy stream, while a stream of its context captures in global mode. */
        for (int i = 0; i < n_streams; i++)
            if (streams[i].implicit && streams[i].capture_status == 1 && &contexts[streams[i].device] == c) implicit = 1;
    }
    pthread_mutex_unlock(&lock);
    if (implicit) return STREAM_CAPTURE_IMPLICIT;
    *status = st;
    if (id) *id = capture;
    if (graph) *graph = NULL;
    if (dependencies) *dependencies = NULL;
    if (count) *count = 0;
    return SUCCESS;
}

CUresult cuThreadExchangeStreamCaptureMode(int *mode) {
    ENTER("cuThreadExchangeStreamCaptureMode");
    if (!mode || *mode < 0 || *mode > 2) return INVALID_VALUE;
    int previous = capture_mode;
    capture_mode = *mode;
    *mode = previous;
    return SUCCESS;
}

CUresult cuEventCreate(CUevent *event, unsigned int flags) {
    ENTER("cuEventCreate");
    if (!event) return INVALID_VALUE;
    if (!current) return INVALID_CONTEXT;
    struct Event *e = malloc(sizeof *e);
    if (!e) return 2;
    pthread_mutex_lock(&lock);
    e->magic = EVENT_MAGIC;
    e->id = ++next_event_id;
    e->context = current;
    live_events++;
    logf_locked("cuEventCreate event=%d %s flags=%u", e->id, context_name(current), flags);
    pthread_mutex_unlock(&lock);
    *event = e;
    return SUCCESS;
}

CUresult cuEventDestroy_v2(CUevent event) {
    ENTER("cuEventDestroy_v2");
    if (!valid_event(event)) return INVALID_HANDLE;
    pthread_mutex_lock(&lock);
    logf_locked("cuEventDestroy event=%d", event->id);
    event->magic = 0; /* kept, not freed: a second destroy or a use is caught, not undefined */
    live_events--;
    pthread_mutex_unlock(&lock);
    return SUCCESS;
}

CUresult cuEventRecord(CUevent event, CUstream stream) {
    ENTER("cuEventRecord");
    if (!valid_event(event)) return INVALID_HANDLE;
    struct Context *c = NULL;
    CUresult r = stream_context(stream, &c);
    if (r != SUCCESS) return r;
    /* The real driver refuses an event of another context than the stream's. */
    if (c != event->context) return INVALID_HANDLE;
    LOG("cuEventRecord event=%d stream=0x%lx %s", event->id, (unsigned long)(uintptr_t)stream, context_name(c));
    return SUCCESS;
}

CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags) {
    ENTER("cuStreamWaitEvent");
    if (!valid_event(event)) return INVALID_HANDLE;
    struct Context *c = NULL;
    CUresult r = stream_context(stream, &c);
    if (r != SUCCESS) return r;
    LOG("cuStreamWaitEvent stream=0x%lx %s event=%d flags=%u", (unsigned long)(uintptr_t)stream, context_name(c),
        event->id, flags);
    return SUCCESS;
}

CUresult cuEventSynchronize(CUevent event) {
    ENTER("cuEventSynchronize");
    if (!valid_event(event)) return INVALID_HANDLE;
    LOG("cuEventSynchronize event=%d", event->id);
    return SUCCESS;
}

CUresult cuStreamSynchronize(CUstream stream) {
    ENTER("cuStreamSynchronize");
    struct Context *c = NULL;
    CUresult r = stream_context(stream, &c);
    if (r != SUCCESS) return r;
    LOG("cuStreamSynchronize stream=0x%lx %s", (unsigned long)(uintptr_t)stream, context_name(c));
    return SUCCESS;
}

/* A stream of the current context, with handles from 0x5000 up (cudarc's views of a
 * producer on the per-thread default stream make one of their own). */
CUresult cuStreamCreate(CUstream *out, unsigned int flags) {
    ENTER("cuStreamCreate");
    static uintptr_t next = 0x5000;
    if (!out) return INVALID_VALUE;
    if (!current) return INVALID_CONTEXT;
    pthread_mutex_lock(&lock);
    int ok = n_streams < MAX_STREAMS;
    uintptr_t handle = next++;
    if (ok) streams[n_streams++] = (struct FakeStream){handle, current->device, 0, 0, 0};
    logf_locked("cuStreamCreate stream=0x%lx flags=%u %s", (unsigned long)handle, flags, context_name(current));
    pthread_mutex_unlock(&lock);
    if (!ok) return OUT_OF_MEMORY;
    *out = (CUstream)handle;
    return SUCCESS;
}

CUresult cuStreamDestroy_v2(CUstream stream) {
    ENTER("cuStreamDestroy_v2");
    uintptr_t h = (uintptr_t)stream;
    pthread_mutex_lock(&lock);
    int found = 0;
    for (int i = 0; i < n_streams; i++) {
        if (streams[i].handle == h) {
            streams[i] = streams[--n_streams];
            found = 1;
            break;
        }
    }
    if (found) logf_locked("cuStreamDestroy stream=0x%lx", (unsigned long)h);
    pthread_mutex_unlock(&lock);
    return found ? SUCCESS : INVALID_HANDLE;
}

enum {
    ATTR_CONTEXT = 1,
    ATTR_MEMORY_TYPE = 2,
    ATTR_IS_MANAGED = 8,
    ATTR_DEVICE_ORDINAL = 9,
    ATTR_RANGE_START_ADDR = 11,
    ATTR_RANGE_SIZE = 12,
};

CUresult cuPointerGetAttributes(unsigned int count, int *attributes, void **data, CUdeviceptr ptr) {
    ENTER("cuPointerGetAttributes");
    if (!attributes || !data) return INVALID_VALUE;
    pthread_mutex_lock(&lock);
    logf_locked("cuPointerGetAttributes ptr=0x%llx count=%u", ptr, count);
    if (pointers_need_context && !current) {
        pthread_mutex_unlock(&lock);
        return INVALID_CONTEXT;
    }
    struct Allocation *a = find_allocation_locked(ptr);
    struct Allocation found = a ? *a : (struct Allocation){0};
    pthread_mutex_unlock(&lock);
    /* Unknown pointers get the attributes' null values and success, as documented. */
    for (unsigned i = 0; i < count; i++) {
        if (!data[i]) return INVALID_VALUE;
        switch (attributes[i]) {
        case ATTR_CONTEXT: *(CUcontext *)data[i] = a ? &contexts[found.device] : NULL; break;
        case ATTR_MEMORY_TYPE: *(unsigned *)data[i] = a ? found.kind : 0; break;
        case ATTR_IS_MANAGED: *(unsigned *)data[i] = a ? (unsigned)found.managed : 0; break;
        case ATTR_DEVICE_ORDINAL: *(int *)data[i] = a ? found.device : -2; break;
        case ATTR_RANGE_START_ADDR:
            *(CUdeviceptr *)data[i] = !a ? 0 : found.range_size ? found.range_start : found.start;
            break;
        case ATTR_RANGE_SIZE: *(size_t *)data[i] = !a ? 0 : found.range_size ? found.range_size : found.size; break;
        default: return INVALID_VALUE;
        }
    }
    return SUCCESS;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr ptr) {
    ENTER("cuMemGetAddressRange_v2");
    if (!current) return INVALID_CONTEXT;
    pthread_mutex_lock(&lock);
    struct Allocation *a = find_allocation_locked(ptr);
    struct Allocation found = a ? *a : (struct Allocation){0};
    pthread_mutex_unlock(&lock);
    if (!a || found.kind != 2) return NOT_FOUND;
    if (base) *base = found.start;
    if (size) *size = found.size;
    return SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *ptr, size_t size) {
    ENTER("cuMemAlloc_v2");
    if (!ptr || size == 0) return INVALID_VALUE;
    if (!current) return INVALID_CONTEXT;
    void *p = malloc(size);
    if (!p) return 2;
    pthread_mutex_lock(&lock);
    if (n_allocations == MAX_ALLOCATIONS) {
        pthread_mutex_unlock(&lock);
        free(p);
        return 2;
    }
    allocations[n_allocations++] =
        (struct Allocation){(CUdeviceptr)(uintptr_t)p, size, current->device, 2, 0, 1, 0, 0};
    logf_locked("cuMemAlloc size=%zu %s", size, context_name(current));
    pthread_mutex_unlock(&lock);
    *ptr = (CUdeviceptr)(uintptr_t)p;
    return SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr ptr) {
    ENTER("cuMemFree_v2");
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_allocations; i++) {
        if (allocations[i].start == ptr && allocations[i].owned) {
            allocations[i] = allocations[--n_allocations];
            logf_locked("cuMemFree");
            pthread_mutex_unlock(&lock);
            free((void *)(uintptr_t)ptr);
            return SUCCESS;
        }
    }
    pthread_mutex_unlock(&lock);
    return INVALID_VALUE;
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    ENTER("cuMemcpyDtoD_v2");
    if (!current) return INVALID_CONTEXT;
    if (!inside_allocation(src, n) || !inside_allocation(dst, n)) return INVALID_VALUE;
    LOG("cuMemcpyDtoD n=%zu", n);
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return SUCCESS;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    ENTER("cuMemcpyDtoH_v2");
    if (!current) return INVALID_CONTEXT;
    if (!dst || !inside_allocation(src, n)) return INVALID_VALUE;
    LOG("cuMemcpyDtoH n=%zu", n);
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return SUCCESS;
}

/* ---- control functions for the tests ---- */

/* Registers `size` bytes at `start` as memory of `device`: kind 1 pinned host, 2 device. */
int fakeAddAllocation(unsigned long long start, size_t size, int device, unsigned kind, int managed) {
    pthread_mutex_lock(&lock);
    int ok = n_allocations < MAX_ALLOCATIONS && valid_device(device);
    if (ok) allocations[n_allocations++] = (struct Allocation){start, size, device, kind, managed, 0, 0, 0};
    pthread_mutex_unlock(&lock);
    return ok ? 0 : -1;
}

/* Registers `size` bytes at `start` as device memory of `device` mapped through the
 * virtual memory API into the reservation `range_start`, `range_size`. */
int fakeAddMapping(unsigned long long start, size_t size, int device, unsigned long long range_start,
                   size_t range_size) {
    pthread_mutex_lock(&lock);
    int ok = n_allocations < MAX_ALLOCATIONS && valid_device(device);
    if (ok)
        allocations[n_allocations++] = (struct Allocation){start, size, device, 2, 0, 0, range_start, range_size};
    pthread_mutex_unlock(&lock);
    return ok ? 0 : -1;
}

void fakeClearAllocations(void) {
    pthread_mutex_lock(&lock);
    int kept = 0;
    for (int i = 0; i < n_allocations; i++)
        if (allocations[i].owned) allocations[kept++] = allocations[i];
    n_allocations = kept;
    pthread_mutex_unlock(&lock);
}

/* Registers a stream handle on `device`, with a capture status (0 none, 1 active,
 * 2 invalidated) and id; implicit: a blocking stream whose capture makes the legacy
 * stream of its context answer CUDA_ERROR_STREAM_CAPTURE_IMPLICIT. */
int fakeAddStream(uintptr_t handle, int device, unsigned status, unsigned long long id, int implicit) {
    pthread_mutex_lock(&lock);
    struct FakeStream *s = find_stream_locked(handle);
    int ok = valid_device(device) && (s || n_streams < MAX_STREAMS);
    if (ok) {
        if (!s) s = &streams[n_streams++];
        *s = (struct FakeStream){handle, device, status, id, implicit};
    }
    pthread_mutex_unlock(&lock);
    return ok ? 0 : -1;
}

void fakeClearStreams(void) {
    pthread_mutex_lock(&lock);
    n_streams = 0;
    pthread_mutex_unlock(&lock);
}

void fakeClearFailures(void) {
    pthread_mutex_lock(&lock);
    n_failures = 0;
    pointers_need_context = 0;
    pthread_mutex_unlock(&lock);
}

/* Makes cuPointerGetAttributes fail with CUDA_ERROR_INVALID_CONTEXT where no context is
 * current (1), or not (0). */
void fakePointersNeedContext(int need) {
    pthread_mutex_lock(&lock);
    pointers_need_context = need;
    pthread_mutex_unlock(&lock);
}

/* Makes `name` fail with `code` until set to 0. */
void fakeFail(const char *name, int code) {
    pthread_mutex_lock(&lock);
    int i = 0;
    while (i < n_failures && strcmp(failures[i].name, name) != 0) i++;
    if (i == n_failures && code && n_failures < MAX_FAILURES) {
        snprintf(failures[i].name, sizeof failures[i].name, "%s", name);
        n_failures++;
    }
    if (i < n_failures) failures[i].code = code;
    pthread_mutex_unlock(&lock);
}

int fakeLiveEvents(void) {
    pthread_mutex_lock(&lock);
    int n = live_events;
    pthread_mutex_unlock(&lock);
    return n;
}

/* The calling thread's current context's device, or -1 for none. */
int fakeCurrentDevice(void) {
    return current ? current->device : -1;
}

/* A registered stream's capture status (0 none, 1 active, 2 invalidated), or -1. */
int fakeCaptureStatus(uintptr_t handle) {
    pthread_mutex_lock(&lock);
    struct FakeStream *s = find_stream_locked(handle);
    int status = s ? (int)s->capture_status : -1;
    pthread_mutex_unlock(&lock);
    return status;
}

int fakeCaptureMode(void) {
    return capture_mode;
}

/* Copies the log into `buffer` (at most `capacity` bytes with the final 0) and returns
 * its full length. */
size_t fakeLog(char *buffer, size_t capacity) {
    pthread_mutex_lock(&lock);
    size_t n = log_len;
    if (buffer && capacity) {
        size_t copied = n < capacity - 1 ? n : capacity - 1;
        if (copied) memcpy(buffer, log_text, copied);
        buffer[copied] = 0;
    }
    pthread_mutex_unlock(&lock);
    return n;
}

void fakeClearLog(void) {
    pthread_mutex_lock(&lock);
    log_len = 0;
    if (log_text) log_text[0] = 0;
    pthread_mutex_unlock(&lock);
}

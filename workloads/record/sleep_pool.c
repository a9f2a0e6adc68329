/*
 * An engine's pool allocator with sleep and wake, for a torch.cuda.MemPool
 * (torch.cuda.memory.CUDAPluggableAllocator): the kind of allocator vLLM's
 * CuMemAllocator and torch_memory_saver put under their pools. Each
 * allocation PyTorch asks of it is its own virtual range backed by one
 * physical allocation (cuMemAddressReserve, cuMemCreate, cuMemMap). Sleep
 * unmaps and releases the physical memory of every allocation made under a
 * tag while PyTorch still counts the blocks; wake creates and maps it again
 * at the same addresses. The driver is whatever libcuda the process loaded
 * (the fake device in the judge), reached through dlsym.
 *
 * Build: cc -shared -fPIC -O2 -o sleep_pool.so sleep_pool.c -ldl
 *
 *   vl_malloc / vl_free    the CUDAPluggableAllocator pair
 *   vl_set_tag(tag)        tag of the allocations that follow (the pool's)
 *   vl_sleep(tag)          release the tag's physical memory: bytes released
 *   vl_wake(tag)           map it again, all or none: 0, or -1 when the
 *                          device is full (then all of it stays asleep)
 *   vl_mapped_bytes()      physical bytes this allocator holds
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

typedef int cu_result;
typedef unsigned long long cu_ptr;
typedef unsigned long long cu_handle;

/* CUmemAllocationProp and CUmemAccessDesc of the CUDA 12 driver API. */
struct cu_location {
    int type; /* CU_MEM_LOCATION_TYPE_DEVICE = 1 */
    int id;
};
struct cu_prop {
    int type;                 /* CU_MEM_ALLOCATION_TYPE_PINNED = 1 */
    int requested_handle_types;
    struct cu_location location;
    void *win32_meta;
    unsigned char compression;
    unsigned char rdma;
    unsigned short usage;
    unsigned char reserved[4];
};
struct cu_access {
    struct cu_location location;
    int flags; /* CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3 */
};

struct entry {
    cu_ptr ptr;
    size_t size;
    int device;
    int tag;
    int asleep;
    int woke; /* mapped by the wake under way */
    cu_handle handle;
};

static struct entry *entries;
static size_t n_entries, cap_entries;
static int current_tag;
static size_t mapped;

static cu_result (*p_reserve)(cu_ptr *, size_t, size_t, cu_ptr, unsigned long long);
static cu_result (*p_addr_free)(cu_ptr, size_t);
static cu_result (*p_create)(cu_handle *, size_t, const struct cu_prop *, unsigned long long);
static cu_result (*p_release)(cu_handle);
static cu_result (*p_map)(cu_ptr, size_t, size_t, cu_handle, unsigned long long);
static cu_result (*p_unmap)(cu_ptr, size_t);
static cu_result (*p_set_access)(cu_ptr, size_t, const struct cu_access *, size_t);
static cu_result (*p_granularity)(size_t *, const struct cu_prop *, int);

static int load(void) {
    if (p_map)
        return 0;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!lib)
        return -1;
    p_reserve = dlsym(lib, "cuMemAddressReserve");
    p_addr_free = dlsym(lib, "cuMemAddressFree");
    p_create = dlsym(lib, "cuMemCreate");
    p_release = dlsym(lib, "cuMemRelease");
    p_unmap = dlsym(lib, "cuMemUnmap");
    p_set_access = dlsym(lib, "cuMemSetAccess");
    p_granularity = dlsym(lib, "cuMemGetAllocationGranularity");
    p_map = dlsym(lib, "cuMemMap");
    return (p_reserve && p_addr_free && p_create && p_release && p_unmap && p_set_access &&
            p_granularity && p_map)
               ? 0
               : -1;
}

static struct cu_prop prop_for(int device) {
    struct cu_prop p;
    memset(&p, 0, sizeof p);
    p.type = 1;
    p.location.type = 1;
    p.location.id = device;
    return p;
}

/* Creates and maps the physical memory of `e`: 0, or -1 (device full). */
static int back(struct entry *e) {
    struct cu_prop prop = prop_for(e->device);
    cu_handle h;
    if (p_create(&h, e->size, &prop, 0) != 0)
        return -1;
    if (p_map(e->ptr, e->size, 0, h, 0) != 0) {
        p_release(h);
        return -1;
    }
    struct cu_access access = {{1, e->device}, 3};
    p_set_access(e->ptr, e->size, &access, 1);
    e->handle = h;
    e->asleep = 0;
    mapped += e->size;
    return 0;
}

static void unback(struct entry *e) {
    p_unmap(e->ptr, e->size);
    p_release(e->handle);
    e->asleep = 1;
    mapped -= e->size;
}

void vl_set_tag(int tag) { current_tag = tag; }

void *vl_malloc(ssize_t size, int device, void *stream) {
    (void)stream;
    if (size <= 0 || load() != 0)
        return NULL;
    struct cu_prop prop = prop_for(device);
    size_t gran = 0;
    if (p_granularity(&gran, &prop, 0) != 0 || gran == 0)
        gran = (size_t)2 << 20;
    size_t bytes = ((size_t)size + gran - 1) / gran * gran;
    if (n_entries == cap_entries) {
        size_t cap = cap_entries ? cap_entries * 2 : 64;
        struct entry *grown = realloc(entries, cap * sizeof *grown);
        if (!grown)
            return NULL;
        entries = grown;
        cap_entries = cap;
    }
    struct entry *e = &entries[n_entries];
    memset(e, 0, sizeof *e);
    if (p_reserve(&e->ptr, bytes, 0, 0, 0) != 0)
        return NULL;
    e->size = bytes;
    e->device = device;
    e->tag = current_tag;
    if (back(e) != 0) {
        p_addr_free(e->ptr, bytes);
        return NULL;
    }
    n_entries++;
    return (void *)(uintptr_t)e->ptr;
}

void vl_free(void *ptr, ssize_t size, int device, void *stream) {
    (void)size;
    (void)device;
    (void)stream;
    for (size_t i = 0; i < n_entries; i++) {
        struct entry *e = &entries[i];
        if (e->ptr != (cu_ptr)(uintptr_t)ptr)
            continue;
        if (!e->asleep)
            unback(e);
        p_addr_free(e->ptr, e->size);
        entries[i] = entries[--n_entries];
        return;
    }
}

unsigned long long vl_sleep(int tag) {
    unsigned long long released = 0;
    for (size_t i = 0; i < n_entries; i++) {
        struct entry *e = &entries[i];
        if (e->tag == tag && !e->asleep) {
            unback(e);
            released += e->size;
        }
    }
    return released;
}

int vl_wake(int tag) {
    size_t i;
    for (i = 0; i < n_entries; i++) {
        struct entry *e = &entries[i];
        e->woke = 0;
        if (e->tag == tag && e->asleep) {
            if (back(e) != 0)
                break;
            e->woke = 1;
        }
    }
    if (i == n_entries)
        return 0;
    /* The device is full: what this call mapped sleeps again. */
    while (i-- > 0) {
        struct entry *e = &entries[i];
        if (e->woke)
            unback(e);
    }
    return -1;
}

unsigned long long vl_mapped_bytes(void) { return mapped; }

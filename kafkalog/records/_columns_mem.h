/* Memory of the compiled column builder (included once, by _columns.c): growable columns and the Blocks that own
 * finished ones. */
#ifndef KAFKALOG_COLUMNS_MEM_H
#define KAFKALOG_COLUMNS_MEM_H

typedef struct {
    char *p; /* malloc'd, or mapped when BIG_COL or larger (or taken from the block pool); handed to a Block by finish() */
    Py_ssize_t len, cap;
} Col;

/* ---- memory: finished columns are Blocks (buffer-protocol owners of the malloc'd bytes); a freed Block's
 * memory goes to a small pool that the next builder's large columns take first. Fresh memory costs the kernel's
 * page zeroing on first touch, which for 1 KiB values was a fifth of the decode (perf); chunked decoding (the
 * DataSource, iter_record_columns) frees a chunk's columns while the next ones are built. */
#define POOL_SLOTS 32
#define POOL_MIN_BLOCK (64 << 10)
#define POOL_MAX_BYTES ((Py_ssize_t)192 << 20)

static struct {
    char *p;
    Py_ssize_t cap;
} pool[POOL_SLOTS];
static Py_ssize_t pool_bytes;
/* column allocations of POOL_MIN_BLOCK or more: served by the pool, or fresh memory (for the tests: mem_stats) */
static unsigned long long mem_reused, mem_fresh;

/* Columns of BIG_COL bytes or more live in their own anonymous mapping, advised for huge pages before the first
 * touch and grown by mremap, which moves page tables instead of bytes. realloc cannot do this: glibc's chunk
 * header shares a page with the start of the data, so advising the data splits the mapping, glibc's mremap then
 * fails (EFAULT) and every doubling copies the column into fresh 4 KiB pages. */
#if defined(__linux__) && defined(MREMAP_MAYMOVE) && defined(MADV_HUGEPAGE)
#define BIG_COL ((Py_ssize_t)4 << 20)
#define BIG_ALIGN ((Py_ssize_t)2 << 20)
#else
#define BIG_COL PY_SSIZE_T_MAX
#endif

static void mem_free(char *p, Py_ssize_t cap) {
#if defined(__linux__) && defined(MREMAP_MAYMOVE) && defined(MADV_HUGEPAGE)
    if (cap >= BIG_COL) {
        munmap(p, (size_t)cap);
        return;
    }
#endif
    free(p);
}

/* the column's memory grown to ncap bytes (ncap >= BIG_COL), its first c->len bytes kept; NULL when out of memory */
static char *big_grow(Col *c, Py_ssize_t *ncap) {
#if defined(__linux__) && defined(MREMAP_MAYMOVE) && defined(MADV_HUGEPAGE)
    Py_ssize_t want = (*ncap + BIG_ALIGN - 1) & ~(BIG_ALIGN - 1);
    void *np_;
    if (c->cap >= BIG_COL) {
        np_ = mremap(c->p, (size_t)c->cap, (size_t)want, MREMAP_MAYMOVE);
    } else {
        np_ = mmap(NULL, (size_t)want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (np_ != MAP_FAILED) {
            (void)madvise(np_, (size_t)want, MADV_HUGEPAGE);
            if (c->len) memcpy(np_, c->p, (size_t)c->len);
            free(c->p);
        }
    }
    if (np_ == MAP_FAILED) return NULL;
    *ncap = want;
    return (char *)np_;
#else
    (void)c;
    (void)ncap;
    return NULL;
#endif
}

static void mem_release(char *p, Py_ssize_t cap) {
    if (!p) return;
    if (cap >= POOL_MIN_BLOCK && pool_bytes + cap <= POOL_MAX_BYTES) {
        for (int i = 0; i < POOL_SLOTS; i++) {
            if (!pool[i].p) {
                pool[i].p = p;
                pool[i].cap = cap;
                pool_bytes += cap;
                return;
            }
        }
    }
    mem_free(p, cap);
}

/* the smallest pooled block of at least `want` bytes that is at most 4x that or, for a request of 1 MiB or more,
 * a mapping of any size: a mapping's untouched pages cost only address space, and its touched ones are
 * resident whether they wait here or serve the column (a chunk's reservation follows the bytes left to read, so
 * the last chunks of a source ask for less than the blocks the first ones freed), or NULL */
static char *pool_take(Py_ssize_t want, Py_ssize_t *cap) {
    int best = -1;
    for (int i = 0; i < POOL_SLOTS; i++)
        if (pool[i].p && pool[i].cap >= want &&
            (pool[i].cap / 4 <= want || (pool[i].cap >= BIG_COL && want >= (1 << 20))) &&
            (best < 0 || pool[i].cap < pool[best].cap))
            best = i;
    if (best < 0) return NULL;
    char *p = pool[best].p;
    *cap = pool[best].cap;
    pool_bytes -= *cap;
    pool[best].p = NULL;
    return p;
}

static int col_grow(Col *c, Py_ssize_t extra) {
    Py_ssize_t want = c->len + extra;
    Py_ssize_t ncap = c->cap < 256 ? 256 : c->cap;
    while (ncap < want) {
        if (ncap > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        ncap *= 2;
    }
    if (want >= POOL_MIN_BLOCK / 2) {
        Py_ssize_t pcap;
        char *pooled = pool_take(want, &pcap);
        if (pooled) {
            if (c->len) memcpy(pooled, c->p, (size_t)c->len);
            mem_release(c->p, c->cap);
            c->p = pooled;
            c->cap = pcap;
            mem_reused++;
            return 0;
        }
    }
    if (ncap >= POOL_MIN_BLOCK) mem_fresh++;
    char *np_ = ncap >= BIG_COL ? big_grow(c, &ncap) : realloc(c->p, (size_t)ncap);
    if (!np_) {
        PyErr_NoMemory();
        return -1;
    }
    c->p = np_;
    c->cap = ncap;
    return 0;
}

static inline int col_reserve(Col *c, Py_ssize_t extra) {
    return (c->len + extra <= c->cap) ? 0 : col_grow(c, extra);
}

static inline int put_bytes(Col *c, const void *src, Py_ssize_t n) {
    if (col_reserve(c, n) < 0) return -1;
    memcpy(c->p + c->len, src, (size_t)n);
    c->len += n;
    return 0;
}

#define PUT(col, type, value)                                   \
    do {                                                        \
        type v_ = (type)(value);                                \
        if (put_bytes((col), &v_, sizeof(type)) < 0) return -1; \
    } while (0)

/* for the tests: mem_stats() -> (reused, fresh, pooled blocks), and mem_stats(True) also empties the pool first */
static PyObject *py_mem_stats(PyObject *self, PyObject *args) {
    int drain = 0;
    if (!PyArg_ParseTuple(args, "|p", &drain)) return NULL;
    int n = 0;
    for (int i = 0; i < POOL_SLOTS; i++) {
        if (pool[i].p && drain) {
            mem_free(pool[i].p, pool[i].cap);
            pool[i].p = NULL;
        }
        n += pool[i].p != NULL;
    }
    if (drain) pool_bytes = 0;
    return Py_BuildValue("(KKi)", mem_reused, mem_fresh, n);
}

#define MEM_METHODS \
    {"mem_stats", py_mem_stats, METH_VARARGS, \
     "mem_stats(drain=False) -> (reused, fresh, pooled): column allocations of >= 64 KiB served by the block pool " \
     "and by fresh memory so far, and the blocks pooled now (drain: free those first)"},

/* A finished column: owns its bytes, exports them through the buffer protocol (numpy, Arrow wrap it). */
typedef struct {
    PyObject_HEAD
    char *p;
    Py_ssize_t len, cap;
} Block;

static int Block_getbuffer(Block *blk, Py_buffer *view, int flags) {
    return PyBuffer_FillInfo(view, (PyObject *)blk, blk->p, blk->len, 0, flags);
}

static void Block_dealloc(Block *blk) {
    mem_release(blk->p, blk->cap);
    Py_TYPE(blk)->tp_free((PyObject *)blk);
}

static Py_ssize_t Block_length(Block *blk) { return blk->len; }

static PyBufferProcs Block_as_buffer = {(getbufferproc)Block_getbuffer, NULL};
static PySequenceMethods Block_as_sequence = {.sq_length = (lenfunc)Block_length};

static PyTypeObject BlockType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kafkalog.records._columns.Block",
    .tp_basicsize = sizeof(Block),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The bytes of one finished column (buffer protocol); its memory is reused once it is freed.",
    .tp_dealloc = (destructor)Block_dealloc,
    .tp_as_buffer = &Block_as_buffer,
    .tp_as_sequence = &Block_as_sequence,
};

/* move a column's memory into a new Block */
static PyObject *col_to_block(Col *c) {
    Block *blk = PyObject_New(Block, &BlockType);
    if (!blk) return NULL;
    blk->p = c->p;
    blk->len = c->len;
    blk->cap = c->cap;
    c->p = NULL;
    c->len = c->cap = 0;
    return (PyObject *)blk;
}

#endif

/* Memory of the compiled column builder (included once, by _columns.c): growable columns and the Blocks that own
 * finished ones. */
#ifndef KAFKALOG_COLUMNS_MEM_H
#define KAFKALOG_COLUMNS_MEM_H

typedef struct {
    char *p; /* malloc'd, or mapped when BIG_COL or larger (or taken from the block pool); handed to a Block by finish() */
    Py_ssize_t len, cap;
    Py_ssize_t touched; /* a mapping's bytes from p that may be resident past len (an earlier user's, a declined batch's) */
} Col;

/* ---- memory: finished columns are Blocks (buffer-protocol owners of the malloc'd bytes); a freed Block's
 * memory goes to a small pool that the next builder's large columns (and to_arrow's buffers) take first. Fresh
 * memory costs the kernel's page zeroing on first touch, which for 1 KiB values was a fifth of the decode (perf);
 * chunked decoding (the DataSource, iter_record_columns) frees a chunk's columns while the next ones are built,
 * and a whole-source read followed by to_arrow() frees the previous call's columns and table.
 * The pool holds at most POOL_MAX_BYTES of *resident* memory: a malloc'd block counts its capacity, a mapping the
 * huge pages up to the larger of its length and what earlier users wrote (`touched`), so the large reservations
 * of a whole-source read cost address space, not pool room. A mapping that does not fit so has its pages past
 * its length given back (col_trim) first; one that fits keeps them, for the next chunk to write into. */
#define POOL_SLOTS 64
#define POOL_MIN_BLOCK (64 << 10)
#define POOL_MAX_BYTES ((Py_ssize_t)256 << 20)

static struct {
    char *p;
    Py_ssize_t cap, held; /* held: the resident bytes counted against POOL_MAX_BYTES */
} pool[POOL_SLOTS];
static Py_ssize_t pool_bytes;
/* column allocations of POOL_MIN_BLOCK or more: served by the pool, or fresh memory (for the tests: mem_stats) */
static unsigned long long mem_reused, mem_fresh;

/* Columns of BIG_COL bytes or more live in their own anonymous mapping, advised for huge pages before the first
 * touch and grown by mremap, which moves page tables instead of bytes. realloc cannot do this: glibc's chunk
 * header shares a page with the start of the data, so advising the data splits the mapping, glibc's mremap then
 * fails (EFAULT) and every doubling copies the column into fresh 4 KiB pages. */
#if defined(__linux__) && defined(MREMAP_MAYMOVE) && defined(MADV_HUGEPAGE)
#define BIG_MAPPED 1
#define BIG_COL ((Py_ssize_t)4 << 20)
#define BIG_ALIGN ((Py_ssize_t)2 << 20)
#else
#define BIG_MAPPED 0
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

/* memory of `cap` bytes of which `held` may be resident: to the pool when it fits, else freed */
static void mem_release_held(char *p, Py_ssize_t cap, Py_ssize_t held) {
    if (!p) return;
    if (cap >= POOL_MIN_BLOCK && pool_bytes + held <= POOL_MAX_BYTES) {
        for (int i = 0; i < POOL_SLOTS; i++) {
            if (!pool[i].p) {
                pool[i].p = p;
                pool[i].cap = cap;
                pool[i].held = held;
                pool_bytes += held;
                return;
            }
        }
    }
    mem_free(p, cap);
}

/* memory whose resident part is not known (all of it may have been written) */
static void mem_release(char *p, Py_ssize_t cap) { mem_release_held(p, cap, cap); }

/* the bytes of a column's memory that may be resident: a mapping's huge pages up to the larger of len (and the
 * up to 128 bytes past it that copy_field's block copies write) and touched; all of a malloc'd block */
static Py_ssize_t col_held(char *p, Py_ssize_t len, Py_ssize_t cap, Py_ssize_t touched) {
#if BIG_MAPPED
    if (p && cap >= BIG_COL) {
        Py_ssize_t keep = (len + 128 + BIG_ALIGN - 1) & ~(BIG_ALIGN - 1);
        if (keep < touched) keep = touched;
        return keep < cap ? keep : cap;
    }
#else
    (void)p, (void)len, (void)touched;
#endif
    return cap;
}

/* A mapping's pages past its length (huge-page aligned) given back: a reservation that was never written costs
 * nothing to drop, and pages that an earlier user of a pooled mapping or a declined batch wrote there are
 * dropped with it, so col_held is then exact. */
static void col_trim(char *p, Py_ssize_t len, Py_ssize_t cap) {
#if BIG_MAPPED
    Py_ssize_t keep = col_held(p, len, cap, 0);
    if (p && cap >= BIG_COL && keep < cap) (void)madvise(p + keep, (size_t)(cap - keep), MADV_DONTNEED);
#else
    (void)p, (void)len, (void)cap;
#endif
}

/* a column's memory (len bytes written by its last user) back to the pool, or freed */
static void col_release(char *p, Py_ssize_t len, Py_ssize_t cap, Py_ssize_t touched) {
    if (!p) return;
    Py_ssize_t held = col_held(p, len, cap, touched);
    if (pool_bytes + held > POOL_MAX_BYTES && held > col_held(p, len, cap, 0)) {
        col_trim(p, len, cap);
        held = col_held(p, len, cap, 0);
    }
    mem_release_held(p, cap, held);
}

/* the smallest pooled block of at least `want` bytes that is at most 4x that or, for a request of 1 MiB or more,
 * a mapping of any size: a mapping's untouched pages cost only address space, and its touched ones are
 * resident whether they wait here or serve the column (a chunk's reservation follows the bytes left to read, so
 * the last chunks of a source ask for less than the blocks the first ones freed), or NULL */
static char *pool_take(Py_ssize_t want, Py_ssize_t *cap, Py_ssize_t *held) {
    int best = -1;
    for (int i = 0; i < POOL_SLOTS; i++)
        if (pool[i].p && pool[i].cap >= want &&
            (pool[i].cap / 4 <= want || (pool[i].cap >= BIG_COL && want >= (1 << 20))) &&
            (best < 0 || pool[i].cap < pool[best].cap))
            best = i;
    if (best < 0) return NULL;
    char *p = pool[best].p;
    *cap = pool[best].cap;
    *held = pool[best].held;
    pool_bytes -= pool[best].held;
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
    /* a mapping grows by mremap (page tables move, bytes do not): a quarter more, not double, so that a
     * reservation of the whole source is not twice its size and fits the pool once freed */
    if (ncap >= BIG_COL && want >= BIG_COL) ncap = want > c->cap + c->cap / 4 ? want : c->cap + c->cap / 4;
    if (want >= POOL_MIN_BLOCK / 2) {
        Py_ssize_t pcap, pheld;
        char *pooled = pool_take(want, &pcap, &pheld);
        if (pooled) {
            if (c->len) memcpy(pooled, c->p, (size_t)c->len);
            col_release(c->p, c->len, c->cap, c->touched);
            c->p = pooled;
            c->cap = pcap;
            c->touched = pheld;
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
    if (c->cap < BIG_COL) c->touched = 0; /* a new mapping (mremap keeps the pages, and touched, of the old one) */
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

/* mem_stats() -> (reused, fresh, pooled blocks) for the tests; mem_stats(True) also empties the pool first
 * (native.release_column_memory) */
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

/* mem_pool() -> (resident bytes the pool holds, its cap): for the tests and native.release_column_memory */
static PyObject *py_mem_pool(PyObject *self, PyObject *Py_UNUSED(ignored)) {
    return Py_BuildValue("(nn)", pool_bytes, POOL_MAX_BYTES);
}

#define MEM_METHODS \
    {"mem_pool", py_mem_pool, METH_NOARGS, "mem_pool() -> (held, cap): the resident bytes the block pool holds now " \
     "(a mapping counts its huge pages up to its length) and the most it may hold"}, \
    {"mem_stats", py_mem_stats, METH_VARARGS, \
     "mem_stats(drain=False) -> (reused, fresh, pooled): column allocations of >= 64 KiB served by the block pool " \
     "and by fresh memory so far, and the blocks pooled now (drain: free those first)"},

/* A finished column: owns its bytes, exports them through the buffer protocol (numpy, Arrow wrap it). */
typedef struct {
    PyObject_HEAD
    char *p;
    Py_ssize_t len, cap, touched; /* as in Col */
} Block;

static int Block_getbuffer(Block *blk, Py_buffer *view, int flags) {
    return PyBuffer_FillInfo(view, (PyObject *)blk, blk->p, blk->len, 0, flags);
}

static void Block_dealloc(Block *blk) {
    col_release(blk->p, blk->len, blk->cap, blk->touched);
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
    blk->touched = c->touched;
    c->p = NULL;
    c->len = c->cap = c->touched = 0;
    return (PyObject *)blk;
}

#endif

/*
 * Harvest's one native routine: the CRC32C (Castagnoli) of every fixed-size chunk of a buffer, computed or checked in
 * one call.
 *
 * A writer checksums every 512-byte chunk of the data it stores (HDFS's layout: one CRC per chunk on disk, so a single
 * bad chunk is located). From JavaScript that was one call into a CRC library per chunk, two million calls a GiB, and
 * the calls cost more than the CRCs (common/checksum.ts). Here one call fills the CRCs of a whole packet.
 *
 * On x86-64 with SSE 4.2 the CRC32 instruction does the work, three chunks at a time: the chunks' CRCs are independent,
 * so three dependency chains hide the instruction's latency (three cycles, one issued per cycle). Elsewhere a
 * slicing-by-8 table walk computes the same values.
 *
 * Exports (N-API, so one build serves every Node version of the same ABI family):
 *   chunks(data: Uint8Array, chunkBytes: number, out: Uint32Array, portable?: boolean): number
 *     writes the CRC32C of each chunkBytes chunk of data (the last may be shorter) to out[0..n) and returns n;
 *     `portable` walks the table even where the instruction is there (for tests and benchmarks);
 *   verify(pieces: Uint8Array | Uint8Array[], chunkBytes: number, sums: Uint32Array, count: number,
 *          portable?: boolean): number
 *     checks data given as consecutive pieces (a chunk may span two) against the first `count` of `sums`, the
 *     expected CRC of each chunk: -1 when all match and there are as many as chunks, else the index of the first
 *     chunk that does not match (or has no CRC; the number of chunks when there are CRCs left over);
 *   hardware(): boolean
 *     whether the CPU's CRC32 instruction is used.
 */
#define NAPI_VERSION 8
#include <node_api.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define POLY 0x82f63b78u /* CRC32C, reflected */

static uint32_t table[8][256];

static void init_table(void) {
  for (uint32_t b = 0; b < 256; b++) {
    uint32_t c = b;
    for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
    table[0][b] = c;
  }
  for (uint32_t b = 0; b < 256; b++)
    for (int t = 1; t < 8; t++) table[t][b] = (table[t - 1][b] >> 8) ^ table[0][table[t - 1][b] & 0xff];
}

/* The raw register (pre-inverted) carried over n bytes, by table. */
static uint32_t crc_table(uint32_t crc, const uint8_t *p, size_t n) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  while (n >= 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    v ^= crc;
    crc = table[7][v & 0xff] ^ table[6][(v >> 8) & 0xff] ^ table[5][(v >> 16) & 0xff] ^ table[4][(v >> 24) & 0xff] ^
          table[3][(v >> 32) & 0xff] ^ table[2][(v >> 40) & 0xff] ^ table[1][(v >> 48) & 0xff] ^ table[0][v >> 56];
    p += 8;
    n -= 8;
  }
#endif
  while (n--) crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
  return crc;
}

static void chunks_table(const uint8_t *p, size_t len, size_t chunk, uint32_t *out) {
  for (size_t i = 0, at = 0; at < len; i++, at += chunk) {
    size_t n = len - at < chunk ? len - at : chunk;
    out[i] = ~crc_table(0xffffffffu, p + at, n);
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define HARVEST_X86_CRC 1

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t n) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = (uint32_t)c;
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

__attribute__((target("sse4.2"))) static void chunks_hw(const uint8_t *p, size_t len, size_t chunk, uint32_t *out) {
  size_t i = 0;
  /* Three whole chunks at a time, one CRC chain each. */
  for (; (i + 3) * chunk <= len; i += 3) {
    const uint8_t *a = p + i * chunk, *b = a + chunk, *c = b + chunk;
    uint64_t ca = 0xffffffffu, cb = 0xffffffffu, cc = 0xffffffffu;
    size_t k = 0;
    for (; k + 8 <= chunk; k += 8) {
      uint64_t va, vb, vc;
      memcpy(&va, a + k, 8);
      memcpy(&vb, b + k, 8);
      memcpy(&vc, c + k, 8);
      ca = _mm_crc32_u64(ca, va);
      cb = _mm_crc32_u64(cb, vb);
      cc = _mm_crc32_u64(cc, vc);
    }
    uint32_t ra = (uint32_t)ca, rb = (uint32_t)cb, rc = (uint32_t)cc;
    for (; k < chunk; k++) {
      ra = _mm_crc32_u8(ra, a[k]);
      rb = _mm_crc32_u8(rb, b[k]);
      rc = _mm_crc32_u8(rc, c[k]);
    }
    out[i] = ~ra;
    out[i + 1] = ~rb;
    out[i + 2] = ~rc;
  }
  for (size_t at = i * chunk; at < len; i++, at += chunk) {
    size_t n = len - at < chunk ? len - at : chunk;
    out[i] = ~crc_hw(0xffffffffu, p + at, n);
  }
}
#endif

static int use_hw = 0;

/* The raw register carried over n bytes, by instruction or table. */
static uint32_t crc_update(uint32_t crc, const uint8_t *p, size_t n, int hw) {
#ifdef HARVEST_X86_CRC
  if (hw) return crc_hw(crc, p, n);
#else
  (void)hw;
#endif
  return crc_table(crc, p, n);
}

static void chunks_any(const uint8_t *p, size_t len, size_t chunk, uint32_t *out, int hw) {
#ifdef HARVEST_X86_CRC
  if (hw) {
    chunks_hw(p, len, chunk, out);
    return;
  }
#else
  (void)hw;
#endif
  chunks_table(p, len, chunk, out);
}

/* Whole chunks checked per batch (their CRCs go to a stack array first). */
#define VERIFY_BATCH 256

/*
 * Checks data that comes as consecutive pieces (a chunk may span pieces) against nsums expected chunk CRCs. Returns
 * -1 when every chunk matches and there are exactly as many CRCs as chunks; else the index of the first chunk whose
 * CRC differs or has no expected CRC, or the number of chunks when there are more CRCs than chunks.
 */
static int64_t verify_pieces(const uint8_t *const *ptrs, const size_t *lens, size_t npieces, size_t chunk,
                             const uint32_t *sums, size_t nsums, int hw) {
  uint32_t batch[VERIFY_BATCH];
  size_t idx = 0;      /* chunks checked so far */
  size_t in_chunk = 0; /* bytes of the current partial chunk */
  uint32_t reg = 0xffffffffu;
  for (size_t k = 0; k < npieces; k++) {
    const uint8_t *p = ptrs[k];
    size_t len = lens[k], off = 0;
    if (in_chunk > 0) {
      size_t take = chunk - in_chunk < len ? chunk - in_chunk : len;
      reg = crc_update(reg, p, take, hw);
      in_chunk += take;
      off = take;
      if (in_chunk == chunk) {
        if (idx >= nsums || ~reg != sums[idx]) return (int64_t)idx;
        idx++;
        in_chunk = 0;
        reg = 0xffffffffu;
      }
    }
    while (len - off >= chunk) {
      size_t whole = (len - off) / chunk;
      if (whole > VERIFY_BATCH) whole = VERIFY_BATCH;
      chunks_any(p + off, whole * chunk, chunk, batch, hw);
      for (size_t i = 0; i < whole; i++, idx++)
        if (idx >= nsums || batch[i] != sums[idx]) return (int64_t)idx;
      off += whole * chunk;
    }
    if (off < len) {
      reg = crc_update(reg, p + off, len - off, hw);
      in_chunk += len - off;
    }
  }
  if (in_chunk > 0) {
    if (idx >= nsums || ~reg != sums[idx]) return (int64_t)idx;
    idx++;
  }
  return nsums > idx ? (int64_t)idx : -1;
}

static napi_value throw_error(napi_env env, const char *code, const char *message, int range) {
  if (range)
    napi_throw_range_error(env, code, message);
  else
    napi_throw_type_error(env, code, message);
  return NULL;
}

static napi_value chunks(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) return NULL;
  if (argc < 3) return throw_error(env, NULL, "chunks(data, chunkBytes, out) takes three arguments", 0);

  bool is_typed;
  napi_typedarray_type dtype, otype;
  size_t dlen, olen;
  void *dptr, *optr;
  if (napi_is_typedarray(env, argv[0], &is_typed) != napi_ok || !is_typed)
    return throw_error(env, NULL, "data must be a Uint8Array", 0);
  napi_get_typedarray_info(env, argv[0], &dtype, &dlen, &dptr, NULL, NULL);
  if (dtype != napi_uint8_array && dtype != napi_uint8_clamped_array)
    return throw_error(env, NULL, "data must be a Uint8Array", 0);

  double chunk_d;
  if (napi_get_value_double(env, argv[1], &chunk_d) != napi_ok)
    return throw_error(env, NULL, "chunkBytes must be a number", 0);
  if (!(chunk_d >= 1 && chunk_d <= 1073741824.0) || chunk_d != (double)(size_t)chunk_d)
    return throw_error(env, NULL, "chunkBytes must be a whole number from 1 to 2^30", 1);
  size_t chunk = (size_t)chunk_d;

  if (napi_is_typedarray(env, argv[2], &is_typed) != napi_ok || !is_typed)
    return throw_error(env, NULL, "out must be a Uint32Array", 0);
  napi_get_typedarray_info(env, argv[2], &otype, &olen, &optr, NULL, NULL);
  if (otype != napi_uint32_array) return throw_error(env, NULL, "out must be a Uint32Array", 0);

  bool portable = false;
  if (argc >= 4) {
    napi_valuetype t;
    napi_typeof(env, argv[3], &t);
    if (t == napi_boolean) napi_get_value_bool(env, argv[3], &portable);
  }

  size_t n = dlen / chunk + (dlen % chunk != 0);
  if (olen < n) return throw_error(env, NULL, "out is shorter than the number of chunks", 1);

  if (n > 0) {
    /* A Uint32Array's data is 4-byte aligned: its byte offset is a multiple of its element size. */
    uint32_t *out = (uint32_t *)optr;
#ifdef HARVEST_X86_CRC
    if (use_hw && !portable)
      chunks_hw((const uint8_t *)dptr, dlen, chunk, out);
    else
#endif
      chunks_table((const uint8_t *)dptr, dlen, chunk, out);
  }
  napi_value result;
  napi_create_double(env, (double)n, &result);
  return result;
}

/* The bytes of a Uint8Array (or Uint8ClampedArray), or false. */
static bool bytes_of(napi_env env, napi_value v, const uint8_t **ptr, size_t *len) {
  bool is_typed;
  napi_typedarray_type type;
  void *data;
  if (napi_is_typedarray(env, v, &is_typed) != napi_ok || !is_typed) return false;
  napi_get_typedarray_info(env, v, &type, len, &data, NULL, NULL);
  if (type != napi_uint8_array && type != napi_uint8_clamped_array) return false;
  *ptr = (const uint8_t *)data;
  return true;
}

/* Pieces of one call, on the stack (a 1 MiB packet read from TLS comes in about 65; more: the caller's own path). */
#define MAX_PIECES 1024

static napi_value verify(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) return NULL;
  if (argc < 4) return throw_error(env, NULL, "verify(pieces, chunkBytes, sums, count) takes four arguments", 0);

  const uint8_t *ptrs[MAX_PIECES];
  size_t lens[MAX_PIECES];
  size_t npieces = 0;
  bool is_array = false;
  napi_is_array(env, argv[0], &is_array);
  if (is_array) {
    uint32_t n;
    napi_get_array_length(env, argv[0], &n);
    if (n > MAX_PIECES) return throw_error(env, NULL, "more than 1024 pieces", 1);
    for (uint32_t i = 0; i < n; i++) {
      napi_value el;
      if (napi_get_element(env, argv[0], i, &el) != napi_ok || !bytes_of(env, el, &ptrs[i], &lens[i]))
        return throw_error(env, NULL, "every piece must be a Uint8Array", 0);
    }
    npieces = n;
  } else {
    if (!bytes_of(env, argv[0], &ptrs[0], &lens[0]))
      return throw_error(env, NULL, "pieces must be a Uint8Array or an array of them", 0);
    npieces = 1;
  }

  double chunk_d;
  if (napi_get_value_double(env, argv[1], &chunk_d) != napi_ok)
    return throw_error(env, NULL, "chunkBytes must be a number", 0);
  if (!(chunk_d >= 1 && chunk_d <= 1073741824.0) || chunk_d != (double)(size_t)chunk_d)
    return throw_error(env, NULL, "chunkBytes must be a whole number from 1 to 2^30", 1);

  bool is_typed;
  napi_typedarray_type stype;
  size_t slen;
  void *sptr;
  if (napi_is_typedarray(env, argv[2], &is_typed) != napi_ok || !is_typed)
    return throw_error(env, NULL, "sums must be a Uint32Array", 0);
  napi_get_typedarray_info(env, argv[2], &stype, &slen, &sptr, NULL, NULL);
  if (stype != napi_uint32_array) return throw_error(env, NULL, "sums must be a Uint32Array", 0);
  double count_d;
  if (napi_get_value_double(env, argv[3], &count_d) != napi_ok || !(count_d >= 0 && count_d <= (double)slen) ||
      count_d != (double)(size_t)count_d)
    return throw_error(env, NULL, "count must be a whole number no larger than sums.length", 1);

  bool portable = false;
  if (argc >= 5) {
    napi_valuetype t;
    napi_typeof(env, argv[4], &t);
    if (t == napi_boolean) napi_get_value_bool(env, argv[4], &portable);
  }
  int64_t bad = verify_pieces(ptrs, lens, npieces, (size_t)chunk_d, (const uint32_t *)sptr, (size_t)count_d,
                              use_hw && !portable);
  napi_value result;
  napi_create_double(env, (double)bad, &result);
  return result;
}

static napi_value hardware(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value result;
  napi_get_boolean(env, use_hw != 0, &result);
  return result;
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  static int initialized = 0;
  if (!initialized) {
    init_table();
#ifdef HARVEST_X86_CRC
    __builtin_cpu_init();
    use_hw = __builtin_cpu_supports("sse4.2");
#endif
    initialized = 1;
  }
  napi_property_descriptor props[] = {
      {"chunks", NULL, chunks, NULL, NULL, NULL, napi_default, NULL},
      {"verify", NULL, verify, NULL, NULL, NULL, napi_default, NULL},
      {"hardware", NULL, hardware, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, sizeof(props) / sizeof(props[0]), props);
  return exports;
}

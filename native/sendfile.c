/*
 * Zero-copy sends of replica data for the datanode's block transfer port (datanode/zero-copy.ts): a read's DATA frames
 * go to the socket as each frame's head (frame header and chunk checksums) from memory, then its data straight from
 * the block file with sendfile(2), as HDFS's BlockSender does with transferTo. The bytes never enter the process: no
 * read into a buffer, no copy from it into the socket, no verification at the datanode (the client checks every
 * chunk, and reports a bad replica to the namenode).
 *
 * Node has no sendfile, and its event loop cannot tell C code when a socket is writable again, so each call (a job:
 * several frames) runs on a thread of its own, which waits for the socket with poll(2). The job works on duplicates of
 * the socket's and the file's descriptors, made in the calling thread: whatever JavaScript closes meanwhile, the
 * thread never writes to a descriptor number that now names something else. `cancel` shuts the socket down, which
 * ends a job blocked on a reader that stopped reading.
 *
 * Exports:
 *   send(socketFd, fileFd, heads: Buffer[], offsets: number[], lengths: number[], done) -> job
 *     Writes heads[i], then lengths[i] bytes of the file at offsets[i], for every i in order. `done(error, sent)`
 *     runs on the JavaScript thread when the job ends: error null, or a string naming the failure ("EOF" when the
 *     file ended early, "ECANCELED" after cancel, else the errno's name); `sent` counts the bytes written.
 *   cancel(job)
 *     Ends the job at once (its `done` still runs, with "ECANCELED" unless it had already finished).
 */
#define NAPI_VERSION 8
#define _GNU_SOURCE
#include <node_api.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

/* A job never waits for a writable socket longer than this between checks of its cancel flag. */
#define POLL_SLICE_MS 200
#define MAX_FRAMES 4096

typedef struct {
  /* Owned by the job: the heads are copied (a few KiB per frame), so JavaScript may reuse its buffers at once. */
  char *heads;
  size_t *head_lengths;
  int64_t *offsets;
  int64_t *lengths;
  uint32_t frames;
  int socket_fd; /* duplicate; -1 once closed (under `lock`) */
  int file_fd;   /* duplicate */
  pthread_mutex_t lock;
  atomic_int cancelled;
  atomic_int refs; /* the thread and the JavaScript job object */
  napi_threadsafe_function done;
  /* Set by the thread before it calls `done`. */
  const char *error;
  int64_t sent;
} job_t;

static void job_release(job_t *job) {
  if (atomic_fetch_sub(&job->refs, 1) != 1) return;
  pthread_mutex_destroy(&job->lock);
  free(job->heads);
  free(job->head_lengths);
  free(job->offsets);
  free(job->lengths);
  free(job);
}

static const char *errno_name(int e) {
  switch (e) {
    case EPIPE: return "EPIPE";
    case ECONNRESET: return "ECONNRESET";
    case EBADF: return "EBADF";
    case EINVAL: return "EINVAL";
    case EIO: return "EIO";
    case ENOMEM: return "ENOMEM";
    case ENOTCONN: return "ENOTCONN";
    case ETIMEDOUT: return "ETIMEDOUT";
    case EOVERFLOW: return "EOVERFLOW";
    default: return "EIO";
  }
}

/* Waits until the socket takes bytes again; 0, or the error that ends the job. */
static const char *wait_writable(job_t *job) {
  for (;;) {
    if (atomic_load(&job->cancelled)) return "ECANCELED";
    struct pollfd p = {.fd = job->socket_fd, .events = POLLOUT, .revents = 0};
    int n = poll(&p, 1, POLL_SLICE_MS);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_name(errno);
    }
    if (n == 0) continue;
    if (p.revents & POLLOUT) return NULL;
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return "EPIPE";
  }
}

static const char *send_all(job_t *job) {
  size_t head_at = 0;
  for (uint32_t i = 0; i < job->frames; i++) {
    const char *head = job->heads + head_at;
    size_t head_left = job->head_lengths[i];
    head_at += head_left;
    while (head_left > 0) {
      if (atomic_load(&job->cancelled)) return "ECANCELED";
      /* MSG_MORE: the head goes out in the same segments as the start of its data (a head without data is not held
         back waiting for more). */
      ssize_t n = send(job->socket_fd, head, head_left, MSG_NOSIGNAL | (job->lengths[i] > 0 ? MSG_MORE : 0));
      if (n > 0) {
        head += n;
        head_left -= (size_t)n;
        job->sent += n;
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        const char *err = wait_writable(job);
        if (err) return err;
      } else {
        return n == 0 ? "EPIPE" : errno_name(errno);
      }
    }
    off_t at = (off_t)job->offsets[i];
    int64_t left = job->lengths[i];
    while (left > 0) {
      if (atomic_load(&job->cancelled)) return "ECANCELED";
      ssize_t n = sendfile(job->socket_fd, job->file_fd, &at, (size_t)left);
      if (n > 0) {
        left -= n;
        job->sent += n;
      } else if (n == 0) {
        return "EOF";
      } else if (errno == EINTR) {
        continue;
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        const char *err = wait_writable(job);
        if (err) return err;
      } else {
        return errno_name(errno);
      }
    }
  }
  return NULL;
}

static void *run(void *arg) {
  job_t *job = arg;
  const char *err = send_all(job);
  pthread_mutex_lock(&job->lock);
  close(job->socket_fd);
  job->socket_fd = -1;
  pthread_mutex_unlock(&job->lock);
  close(job->file_fd);
  job->error = err;
  /* The JavaScript callback runs later on the loop's thread (call_done), then drops the thread's reference; when the
     environment is going away it never runs, and the reference is dropped here. */
  napi_threadsafe_function done = job->done;
  if (napi_call_threadsafe_function(done, job, napi_tsfn_blocking) != napi_ok) job_release(job);
  napi_release_threadsafe_function(done, napi_tsfn_release);
  return NULL;
}

static void call_done(napi_env env, napi_value callback, void *context, void *data) {
  (void)context;
  job_t *job = data;
  if (env && callback) {
    napi_value args[2], global;
    if (job->error && strcmp(job->error, "ECANCELED") != 0 && atomic_load(&job->cancelled)) job->error = "ECANCELED";
    if (job->error) napi_create_string_utf8(env, job->error, NAPI_AUTO_LENGTH, &args[0]);
    else napi_get_null(env, &args[0]);
    napi_create_int64(env, job->sent, &args[1]);
    napi_get_global(env, &global);
    napi_call_function(env, global, callback, 2, args, NULL);
  }
  job_release(job);
}

static void finalize_job(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  job_release(data);
}

static napi_value throw_type(napi_env env, const char *message) {
  napi_throw_type_error(env, NULL, message);
  return NULL;
}

static int get_i64_array(napi_env env, napi_value array, uint32_t n, int64_t *out) {
  for (uint32_t i = 0; i < n; i++) {
    napi_value v;
    double d;
    if (napi_get_element(env, array, i, &v) != napi_ok || napi_get_value_double(env, v, &d) != napi_ok) return 0;
    if (!(d >= 0 && d <= 9007199254740991.0) || d != (double)(int64_t)d) return 0;
    out[i] = (int64_t)d;
  }
  return 1;
}

static napi_value Send(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value argv[6];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 6) return throw_type(env, "send(socketFd, fileFd, heads, offsets, lengths, done)");
  int32_t socket_fd, file_fd;
  if (napi_get_value_int32(env, argv[0], &socket_fd) != napi_ok || socket_fd < 0)
    return throw_type(env, "socketFd must be a descriptor");
  if (napi_get_value_int32(env, argv[1], &file_fd) != napi_ok || file_fd < 0)
    return throw_type(env, "fileFd must be a descriptor");
  uint32_t frames, n_offsets, n_lengths;
  bool is_array;
  for (int a = 2; a <= 4; a++) {
    if (napi_is_array(env, argv[a], &is_array) != napi_ok || !is_array)
      return throw_type(env, "heads, offsets and lengths must be arrays");
  }
  napi_get_array_length(env, argv[2], &frames);
  napi_get_array_length(env, argv[3], &n_offsets);
  napi_get_array_length(env, argv[4], &n_lengths);
  if (frames == 0 || frames > MAX_FRAMES || n_offsets != frames || n_lengths != frames)
    return throw_type(env, "heads, offsets and lengths must have the same length, 1 to 4096");
  napi_valuetype type;
  napi_typeof(env, argv[5], &type);
  if (type != napi_function) return throw_type(env, "done must be a function");

  job_t *job = calloc(1, sizeof(job_t));
  if (!job) return throw_type(env, "out of memory");
  pthread_mutex_init(&job->lock, NULL);
  job->frames = frames;
  job->head_lengths = calloc(frames, sizeof(size_t));
  job->offsets = calloc(frames, sizeof(int64_t));
  job->lengths = calloc(frames, sizeof(int64_t));
  size_t total = 0;
  int ok = job->head_lengths && job->offsets && job->lengths;
  for (uint32_t i = 0; ok && i < frames; i++) {
    napi_value h;
    bool is_buffer = false;
    size_t len = 0;
    void *data = NULL;
    ok = napi_get_element(env, argv[2], i, &h) == napi_ok && napi_is_buffer(env, h, &is_buffer) == napi_ok &&
         is_buffer && napi_get_buffer_info(env, h, &data, &len) == napi_ok;
    if (ok) {
      job->head_lengths[i] = len;
      total += len;
    }
  }
  if (ok) job->heads = malloc(total > 0 ? total : 1);
  ok = ok && job->heads;
  size_t at = 0;
  for (uint32_t i = 0; ok && i < frames; i++) {
    napi_value h;
    size_t len = 0;
    void *data = NULL;
    napi_get_element(env, argv[2], i, &h);
    napi_get_buffer_info(env, h, &data, &len);
    memcpy(job->heads + at, data, len);
    at += len;
  }
  ok = ok && get_i64_array(env, argv[3], frames, job->offsets) && get_i64_array(env, argv[4], frames, job->lengths);
  if (!ok) {
    job->refs = 1;
    job_release(job);
    return throw_type(env, "heads must be Buffers, offsets and lengths non-negative integers");
  }
  job->socket_fd = fcntl(socket_fd, F_DUPFD_CLOEXEC, 0);
  job->file_fd = job->socket_fd < 0 ? -1 : fcntl(file_fd, F_DUPFD_CLOEXEC, 0);
  if (job->file_fd < 0) {
    int e = errno;
    if (job->socket_fd >= 0) close(job->socket_fd);
    job->refs = 1;
    job_release(job);
    napi_throw_error(env, errno_name(e), "cannot duplicate the socket's or the file's descriptor");
    return NULL;
  }
  job->refs = 2;

  napi_value name, handle;
  napi_create_string_utf8(env, "harvest sendfile", NAPI_AUTO_LENGTH, &name);
  napi_status s = napi_create_threadsafe_function(env, argv[5], NULL, name, 0, 1, NULL, NULL, NULL, call_done, &job->done);
  if (s == napi_ok) s = napi_create_external(env, job, finalize_job, NULL, &handle);
  pthread_t thread;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  /* The thread needs little stack: it only makes system calls. */
  pthread_attr_setstacksize(&attr, 64 * 1024);
  if (s == napi_ok && pthread_create(&thread, &attr, run, job) == 0) {
    pthread_attr_destroy(&attr);
    return handle;
  }
  pthread_attr_destroy(&attr);
  close(job->socket_fd);
  close(job->file_fd);
  if (job->done) napi_release_threadsafe_function(job->done, napi_tsfn_abort);
  /* The external (if made) holds one reference; the thread's never started. */
  job_release(job);
  if (s != napi_ok) job_release(job);
  napi_throw_error(env, "EAGAIN", "cannot start a sendfile thread");
  return NULL;
}

static napi_value Cancel(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  void *data = NULL;
  napi_valuetype type = napi_undefined;
  if (argc >= 1) napi_typeof(env, argv[0], &type);
  if (type != napi_external || napi_get_value_external(env, argv[0], &data) != napi_ok || !data)
    return throw_type(env, "cancel(job) takes a job from send");
  job_t *job = data;
  atomic_store(&job->cancelled, 1);
  pthread_mutex_lock(&job->lock);
  /* A blocked send or poll returns at once; the socket is done for (the connection is being abandoned). */
  if (job->socket_fd >= 0) shutdown(job->socket_fd, SHUT_RDWR);
  pthread_mutex_unlock(&job->lock);
  return NULL;
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "send", NAPI_AUTO_LENGTH, Send, NULL, &fn);
  napi_set_named_property(env, exports, "send", fn);
  napi_create_function(env, "cancel", NAPI_AUTO_LENGTH, Cancel, NULL, &fn);
  napi_set_named_property(env, exports, "cancel", fn);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)

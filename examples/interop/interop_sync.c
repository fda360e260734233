/* interop_sync: see interop_sync.h. */
#include "interop_sync.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct isync_msg {
  isync_msg *next;
  ProtobufCMessage *msg;
  int compressed;
};

/* ---- helpers */

static struct timespec deadline_in(unsigned ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += (time_t)(ms / 1000);
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

/* Waits on s->cv until *cond becomes true or the deadline passes; s->mu
 * held. Returns non-zero when cond is true. */
#define WAIT_UNTIL(s, cond, deadline)                                          \
  do {                                                                         \
    int wait_rc_ = 0;                                                          \
    while (!(cond) && wait_rc_ != ETIMEDOUT)                                   \
      wait_rc_ = pthread_cond_timedwait(&(s)->cv, &(s)->mu, (deadline));       \
  } while (0)

sluice_metadata *isync_metadata_copy(const sluice_metadata *md) {
  sluice_metadata *copy = NULL;
  if (md == NULL || sluice_metadata_new(&copy) != 0)
    return NULL;
  size_t n = sluice_metadata_count(md);
  for (size_t i = 0; i < n; i++) {
    const char *key;
    const void *value;
    size_t len;
    if (sluice_metadata_get(md, i, &key, &value, &len) != 0 ||
        sluice_metadata_add(copy, key, value, len) != 0) {
      sluice_metadata_del(copy);
      return NULL;
    }
  }
  return copy;
}

/* A deep copy of msg (pack, then unpack), or NULL when out of memory. */
static ProtobufCMessage *copy_message(const ProtobufCMessage *msg) {
  size_t len = protobuf_c_message_get_packed_size(msg);
  uint8_t *buf = malloc(len > 0 ? len : 1);
  if (buf == NULL)
    return NULL;
  protobuf_c_message_pack(msg, buf);
  ProtobufCMessage *copy =
      protobuf_c_message_unpack(msg->descriptor, NULL, len, buf);
  free(buf);
  return copy;
}

void isync_free_msg(ProtobufCMessage *msg) {
  if (msg != NULL)
    protobuf_c_message_free_unpacked(msg, NULL);
}

/* ---- callbacks (channel loop thread) */

static void on_message(sluice_call *call, const ProtobufCMessage *msg,
                       void *user_data) {
  isync *s = user_data;
  isync_msg *m = malloc(sizeof *m);
  ProtobufCMessage *copy = m != NULL ? copy_message(msg) : NULL;
  pthread_mutex_lock(&s->mu);
  s->received++;
  if (copy == NULL) {
    free(m);
    s->copy_failed = 1;
  } else {
    m->next = NULL;
    m->msg = copy;
    m->compressed = sluice_call_last_message_compressed(call);
    if (s->tail != NULL)
      s->tail->next = m;
    else
      s->head = m;
    s->tail = m;
  }
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static void on_send_ready(sluice_call *call, void *user_data) {
  (void)call;
  isync *s = user_data;
  pthread_mutex_lock(&s->mu);
  s->ready_gen++;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static void on_done(sluice_call *call, const sluice_status *st,
                    void *user_data) {
  (void)call;
  isync *s = user_data;
  sluice_status copy;
  sluice_status_init(&copy);
  copy.code = st->code;
  copy.message = strdup(st->message != NULL ? st->message : "");
  copy.initial_md = isync_metadata_copy(st->initial_md);
  copy.trailing_md = isync_metadata_copy(st->trailing_md);
  pthread_mutex_lock(&s->mu);
  s->status = copy;
  s->done = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static const sluice_call_handlers handlers = {
    .on_message = on_message,
    .on_send_ready = on_send_ready,
    .on_done = on_done,
};

/* ---- API */

int isync_start(isync **out, sluice_channel *ch,
                const sluice_method_desc *method, const ProtobufCMessage *req,
                const sluice_call_opts *opts) {
  *out = NULL;
  isync *s = calloc(1, sizeof *s);
  if (s == NULL)
    return SLUICE_ERR_NOMEM;
  pthread_condattr_t cattr;
  pthread_condattr_init(&cattr);
  pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
  pthread_cond_init(&s->cv, &cattr);
  pthread_condattr_destroy(&cattr);
  pthread_mutex_init(&s->mu, NULL);
  sluice_status_init(&s->status);

  /* No callback runs before the start function returns (its contract), so
   * s->call is set before any of them could look at it. */
  int rc =
      req != NULL
          ? sluice_call_start_msg(ch, method, req, opts, &handlers, s, &s->call)
          : sluice_call_start(ch, method, opts, &handlers, s, &s->call);
  if (rc != 0) {
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
    return rc;
  }
  *out = s;
  return 0;
}

int isync_send(isync *s, const ProtobufCMessage *msg, unsigned flags) {
  struct timespec deadline = deadline_in(ISYNC_WAIT_MS);
  for (;;) {
    pthread_mutex_lock(&s->mu);
    unsigned gen = s->ready_gen;
    pthread_mutex_unlock(&s->mu);
    int rc = sluice_call_send_ex(s->call, msg, flags);
    if (rc != SLUICE_ERR_FULL)
      return rc;
    /* Full: on_send_ready (or the end of the call) lets us go on. */
    pthread_mutex_lock(&s->mu);
    int rc_wait = 0;
    while (s->ready_gen == gen && !s->done && rc_wait != ETIMEDOUT)
      rc_wait = pthread_cond_timedwait(&s->cv, &s->mu, &deadline);
    int timed_out = s->ready_gen == gen && !s->done;
    pthread_mutex_unlock(&s->mu);
    if (timed_out)
      return SLUICE_ERR_FULL;
  }
}

int isync_close_send(isync *s) { return sluice_call_close_send(s->call); }

void isync_cancel(isync *s) { sluice_call_cancel(s->call, NULL); }

int isync_next(isync *s, ProtobufCMessage **msg, int *compressed) {
  struct timespec deadline = deadline_in(ISYNC_WAIT_MS);
  *msg = NULL;
  pthread_mutex_lock(&s->mu);
  WAIT_UNTIL(s, s->head != NULL || s->done, &deadline);
  isync_msg *m = s->head;
  int rc;
  if (m != NULL) {
    s->head = m->next;
    if (s->head == NULL)
      s->tail = NULL;
    *msg = m->msg;
    if (compressed != NULL)
      *compressed = m->compressed;
    free(m);
    rc = 1;
  } else {
    rc = s->done ? 0 : -1;
  }
  pthread_mutex_unlock(&s->mu);
  return rc;
}

int isync_wait_done(isync *s) {
  struct timespec deadline = deadline_in(ISYNC_WAIT_MS);
  pthread_mutex_lock(&s->mu);
  WAIT_UNTIL(s, s->done, &deadline);
  int done = s->done;
  pthread_mutex_unlock(&s->mu);
  return done ? 0 : -1;
}

int isync_copy_failed(isync *s) {
  pthread_mutex_lock(&s->mu);
  int failed = s->copy_failed;
  pthread_mutex_unlock(&s->mu);
  return failed;
}

void isync_destroy(isync *s) {
  if (s == NULL)
    return;
  pthread_mutex_lock(&s->mu);
  int done = s->done;
  pthread_mutex_unlock(&s->mu);
  if (!done) {
    sluice_call_cancel(s->call, NULL);
    if (isync_wait_done(s) != 0) {
      /* The library still holds s as user_data: freeing it would let a late
       * callback write to freed memory. */
      fprintf(stderr,
              "interop_sync: on_done did not fire within %d ms of "
              "a cancel; leaking the call's state\n",
              ISYNC_WAIT_MS);
      sluice_call_release(s->call);
      return;
    }
  }
  sluice_call_release(s->call);
  while (s->head != NULL) {
    isync_msg *m = s->head;
    s->head = m->next;
    isync_free_msg(m->msg);
    free(m);
  }
  sluice_status_clear(&s->status);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s);
}

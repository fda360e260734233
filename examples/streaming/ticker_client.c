/* ticker_client: calls streaming_demo.Ticker (route.proto).
 *
 *   ticker_client --target HOST:PORT --demo countdown|sum|chat|all
 *
 *  - countdown: asks for 5..1, one tick every 100 ms, prints each tick;
 *  - sum: sends the numbers 1..100 and prints the total. The call's send
 *    queue is made tiny so that it fills up: the loop shows what to do then
 *    (wait for on_send_ready and send again);
 *  - chat: sends three notes, half-closes, prints the echoes.
 *
 * Every demo ends with a "<demo>: <STATUS>" line. Exits 0 when every call
 * ended OK, 1 otherwise, 2 on bad flags.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sluice/sluice.h>

#include "route.sluice.h"

#define CALL_TIMEOUT_MS 10000            /* each call's deadline */
#define WAIT_MS (CALL_TIMEOUT_MS + 5000) /* our waits, should it not hold */
#define SUM_COUNT 100
#define SUM_SEND_BUFFER 64 /* bytes: tiny on purpose, to meet a full queue */

/* What a call's callbacks (on the channel's loop thread) tell the main
 * thread, under mu. */
typedef struct demo {
  const char *name;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* CLOCK_MONOTONIC */
  sluice_call *call;
  unsigned ready_gen;      /* bumped by on_send_ready */
  int done;                /* on_done fired; code and message are set */
  sluice_status_code code; /* the final status */
  char *message;
} demo;

static void demo_init(demo *d, const char *name) {
  memset(d, 0, sizeof *d);
  d->name = name;
  pthread_mutex_init(&d->mu, NULL);
  pthread_condattr_t cattr;
  pthread_condattr_init(&cattr);
  pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
  pthread_cond_init(&d->cv, &cattr);
  pthread_condattr_destroy(&cattr);
}

static void demo_destroy(demo *d) {
  free(d->message);
  pthread_mutex_destroy(&d->mu);
  pthread_cond_destroy(&d->cv);
}

static struct timespec deadline_in_ms(unsigned ms) {
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

/* ---- callbacks (channel loop thread) */

static void on_send_ready(sluice_call *call, void *user_data) {
  (void)call;
  demo *d = user_data;
  pthread_mutex_lock(&d->mu);
  d->ready_gen++;
  pthread_cond_broadcast(&d->cv);
  pthread_mutex_unlock(&d->mu);
}

static void on_done(sluice_call *call, const sluice_status *st,
                    void *user_data) {
  (void)call;
  demo *d = user_data;
  char *message = st->message != NULL ? strdup(st->message) : NULL;
  pthread_mutex_lock(&d->mu);
  d->code = st->code;
  d->message = message;
  d->done = 1;
  pthread_cond_broadcast(&d->cv);
  pthread_mutex_unlock(&d->mu);
}

static void on_tick(sluice_call *call, const StreamingDemo__Tick *tick,
                    void *user_data) {
  (void)call;
  (void)user_data;
  printf("countdown: %u\n", tick->value);
}

static void on_total(sluice_call *call, const StreamingDemo__Total *total,
                     void *user_data) {
  (void)call;
  (void)user_data;
  printf("sum: %lld from %u numbers\n", (long long)total->sum, total->count);
}

static void on_note(sluice_call *call, const StreamingDemo__Note *note,
                    void *user_data) {
  (void)call;
  (void)user_data;
  printf("chat: %s\n", note->text);
}

/* ---- waiting on the main thread */

/* Waits until on_send_ready fires after gen was read, or the call ends.
 * Returns 0 (send again) or -1 (the call is over, or no news in time). */
static int wait_send_ready(demo *d, unsigned gen) {
  struct timespec until = deadline_in_ms(WAIT_MS);
  int rc = 0;
  pthread_mutex_lock(&d->mu);
  while (d->ready_gen == gen && !d->done && rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(&d->cv, &d->mu, &until);
  int ready = d->ready_gen != gen && !d->done;
  pthread_mutex_unlock(&d->mu);
  return ready ? 0 : -1;
}

static int wait_done(demo *d) {
  struct timespec until = deadline_in_ms(WAIT_MS);
  int rc = 0;
  pthread_mutex_lock(&d->mu);
  while (!d->done && rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(&d->cv, &d->mu, &until);
  int done = d->done;
  pthread_mutex_unlock(&d->mu);
  return done ? 0 : -1;
}

/* Waits for on_done (cancelling the call if it takes too long), releases
 * the call, prints "<name>: <STATUS>[: message]". Returns 0 for OK. */
static int demo_end(demo *d) {
  if (wait_done(d) != 0) {
    sluice_call_cancel(d->call, "the client gave up waiting");
    if (wait_done(d) != 0) {
      /* The call still points at d: leave everything as it is. */
      fprintf(stderr, "%s: no on_done, giving up\n", d->name);
      exit(1);
    }
  }
  sluice_call_release(d->call);
  printf("%s: %s%s%s\n", d->name, sluice_status_name(d->code),
         d->message != NULL && *d->message != '\0' ? ": " : "",
         d->message != NULL ? d->message : "");
  return d->code == SLUICE_STATUS_OK ? 0 : -1;
}

/* ---- the demos */

static int demo_countdown(sluice_channel *ch) {
  demo d;
  demo_init(&d, "countdown");
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.timeout_ms = CALL_TIMEOUT_MS;
  const StreamingDemo__Ticker__Countdown_Handlers h = {.on_message = on_tick,
                                                       .on_done = on_done};

  StreamingDemo__CountdownRequest req = STREAMING_DEMO__COUNTDOWN_REQUEST__INIT;
  req.from = 5;
  req.interval_ms = 100;
  int rc = streaming_demo__ticker__countdown__start(ch, &req, &opts, &h, &d,
                                                    &d.call);
  if (rc == 0)
    rc = demo_end(&d);
  else
    fprintf(stderr, "countdown: cannot start: %s\n", sluice_strerror(rc));
  demo_destroy(&d);
  return rc;
}

static int demo_sum(sluice_channel *ch) {
  demo d;
  demo_init(&d, "sum");
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.timeout_ms = CALL_TIMEOUT_MS;
  opts.send_buffer = SUM_SEND_BUFFER;
  const StreamingDemo__Ticker__Sum_Handlers h = {.on_message = on_total,
                                                 .on_send_ready = on_send_ready,
                                                 .on_done = on_done};

  int rc = streaming_demo__ticker__sum__start(ch, &opts, &h, &d, &d.call);
  if (rc != 0) {
    fprintf(stderr, "sum: cannot start: %s\n", sluice_strerror(rc));
    demo_destroy(&d);
    return rc;
  }
  unsigned waits = 0;
  for (int i = 1; i <= SUM_COUNT && rc == 0; i++) {
    StreamingDemo__Number n = STREAMING_DEMO__NUMBER__INIT;
    n.value = i;
    for (;;) {
      pthread_mutex_lock(&d.mu);
      unsigned gen = d.ready_gen;
      pthread_mutex_unlock(&d.mu);
      rc = streaming_demo__ticker__sum__send(d.call, &n);
      if (rc != SLUICE_ERR_FULL)
        break;
      /* Nothing was queued: wait until the queue drains, then resend. */
      waits++;
      if (wait_send_ready(&d, gen) != 0)
        break;
    }
  }
  if (rc == 0) {
    printf("sum: sent %d numbers, waited for on_send_ready %u times\n",
           SUM_COUNT, waits);
    rc = sluice_call_close_send(d.call);
  }
  if (rc != 0) { /* SLUICE_ERR_STATE: the call is over, on_done says why */
    fprintf(stderr, "sum: send: %s\n", sluice_strerror(rc));
    sluice_call_cancel(d.call, NULL);
  }
  rc = demo_end(&d);
  demo_destroy(&d);
  return rc;
}

static int demo_chat(sluice_channel *ch) {
  static const char *const notes[] = {"hello", "how are you?", "bye"};
  demo d;
  demo_init(&d, "chat");
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.timeout_ms = CALL_TIMEOUT_MS;
  const StreamingDemo__Ticker__Chat_Handlers h = {.on_message = on_note,
                                                  .on_done = on_done};

  int rc = streaming_demo__ticker__chat__start(ch, &opts, &h, &d, &d.call);
  if (rc != 0) {
    fprintf(stderr, "chat: cannot start: %s\n", sluice_strerror(rc));
    demo_destroy(&d);
    return rc;
  }
  /* Three short notes fit the send queue: no SLUICE_ERR_FULL here. */
  for (size_t i = 0; i < sizeof notes / sizeof notes[0] && rc == 0; i++) {
    StreamingDemo__Note note = STREAMING_DEMO__NOTE__INIT;
    note.text = (char *)notes[i];
    rc = streaming_demo__ticker__chat__send(d.call, &note);
  }
  if (rc == 0)
    rc = sluice_call_close_send(d.call);
  if (rc != 0) {
    fprintf(stderr, "chat: send: %s\n", sluice_strerror(rc));
    sluice_call_cancel(d.call, NULL);
  }
  rc = demo_end(&d);
  demo_destroy(&d);
  return rc;
}

/* ---- main */

static void usage(FILE *f, const char *prog) {
  fprintf(f, "usage: %s --target HOST:PORT --demo countdown|sum|chat|all\n",
          prog);
}

int main(int argc, char **argv) {
  const char *prog = argv[0], *target = NULL, *which = NULL;

  for (int i = 1; i < argc; i += 2) {
    const char *flag = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) {
      usage(stdout, prog);
      return 0;
    } else if (strcmp(flag, "--target") == 0 && val != NULL) {
      target = val;
    } else if (strcmp(flag, "--demo") == 0 && val != NULL) {
      which = val;
    } else {
      fprintf(stderr, "%s: bad argument '%s'\n", prog, flag);
      usage(stderr, prog);
      return 2;
    }
  }
  int all = which != NULL && strcmp(which, "all") == 0;
  int countdown = all || (which != NULL && strcmp(which, "countdown") == 0);
  int sum = all || (which != NULL && strcmp(which, "sum") == 0);
  int chat = all || (which != NULL && strcmp(which, "chat") == 0);
  if (target == NULL || !(countdown || sum || chat)) {
    fprintf(stderr, "%s: --target and a known --demo are required\n", prog);
    usage(stderr, prog);
    return 2;
  }

  sluice_channel *ch;
  int rc = sluice_channel_new(&ch, target, NULL);
  if (rc != 0) {
    fprintf(stderr, "%s: cannot use target '%s': %s\n", prog, target,
            sluice_strerror(rc));
    return 1;
  }
  int failed = 0;
  if (countdown)
    failed |= demo_countdown(ch) != 0;
  if (sum)
    failed |= demo_sum(ch) != 0;
  if (chat)
    failed |= demo_chat(ch) != 0;
  sluice_channel_del(ch);
  if (fflush(stdout) != 0)
    failed = 1;
  return failed ? 1 : 0;
}

// Preloaded by .ci/tsan. librdkafka (Debian 12) is built on C11 threads, and glibc implements thrd_*,
// mtx_* and cnd_* by calling its pthread internals directly, so GCC 12's ThreadSanitizer, which
// intercepts only the pthread_* entry points, never sees librdkafka's threads (they crash at their
// first allocation) nor its locks (hundreds of false races). These go through pthread_*.
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>

static int result_of(int err) {
    switch (err) {
    case 0: return thrd_success;
    case EBUSY: return thrd_busy;
    case ETIMEDOUT: return thrd_timedout;
    case ENOMEM: case EAGAIN: return thrd_nomem;
    default: return thrd_error;
    }
}

struct start { thrd_start_t func; void* arg; };

static void* run(void* p) {
    struct start s = *(struct start*)p;
    free(p);
    return (void*)(intptr_t)s.func(s.arg);
}

int thrd_create(thrd_t* thread, thrd_start_t func, void* arg) {
    struct start* s = malloc(sizeof *s);
    if (!s) return thrd_nomem;
    s->func = func;
    s->arg = arg;
    const int err = pthread_create(thread, NULL, run, s);
    if (err != 0) free(s);
    return result_of(err);
}

int thrd_join(thrd_t thread, int* res) {
    void* value = NULL;
    const int err = pthread_join(thread, &value);
    if (err == 0 && res) *res = (int)(intptr_t)value;
    return result_of(err);
}

int thrd_detach(thrd_t thread) { return result_of(pthread_detach(thread)); }

#define MTX(m) ((pthread_mutex_t*)(m))
#define CND(c) ((pthread_cond_t*)(c))

int mtx_init(mtx_t* m, int type) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    if (type & mtx_recursive) pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    const int err = pthread_mutex_init(MTX(m), &attr);
    pthread_mutexattr_destroy(&attr);
    return result_of(err);
}
int mtx_lock(mtx_t* m) { return result_of(pthread_mutex_lock(MTX(m))); }
int mtx_trylock(mtx_t* m) { return result_of(pthread_mutex_trylock(MTX(m))); }
int mtx_timedlock(mtx_t* restrict m, const struct timespec* restrict at) { return result_of(pthread_mutex_timedlock(MTX(m), at)); }
int mtx_unlock(mtx_t* m) { return result_of(pthread_mutex_unlock(MTX(m))); }
void mtx_destroy(mtx_t* m) { pthread_mutex_destroy(MTX(m)); }

int cnd_init(cnd_t* c) { return result_of(pthread_cond_init(CND(c), NULL)); }
int cnd_signal(cnd_t* c) { return result_of(pthread_cond_signal(CND(c))); }
int cnd_broadcast(cnd_t* c) { return result_of(pthread_cond_broadcast(CND(c))); }
int cnd_wait(cnd_t* c, mtx_t* m) { return result_of(pthread_cond_wait(CND(c), MTX(m))); }
int cnd_timedwait(cnd_t* restrict c, mtx_t* restrict m, const struct timespec* restrict at) {
    return result_of(pthread_cond_timedwait(CND(c), MTX(m), at));
}
void cnd_destroy(cnd_t* c) { pthread_cond_destroy(CND(c)); }

void call_once(once_flag* flag, void (*func)(void)) { pthread_once((pthread_once_t*)flag, func); }

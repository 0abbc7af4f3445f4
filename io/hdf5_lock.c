/* hdf5_lock.c: see hdf5_lock.h. */
#include "io/hdf5_lock.h"
#include "app/core/error.h"

#include <pthread.h>

static pthread_mutex_t hdf5_mutex = PTHREAD_MUTEX_INITIALIZER;

void hdf5_lock(void) {
    CHECK(pthread_mutex_lock(&hdf5_mutex) == 0, "pthread_mutex_lock of the HDF5 lock failed");
}

void hdf5_unlock(void) {
    CHECK(pthread_mutex_unlock(&hdf5_mutex) == 0, "pthread_mutex_unlock of the HDF5 lock failed");
}

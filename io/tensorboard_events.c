/* tensorboard_events.c: see tensorboard_events.h. The protocol buffer is written by hand: an
 * Event is {1: wall_time double, 2: step int64, 3: file_version string, 5: summary}, a Summary is
 * {1: repeated Value}, a Value is {1: tag string, 2: simple_value float} (tensorflow/core/util/
 * event.proto and framework/summary.proto). */
#include "io/tensorboard_events.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

uint32_t tensorboard_crc32c(const void *data, size_t len) {
    const unsigned char *p = data;
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        for (int bit = 0; bit < 8; bit++) crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
    }
    return ~crc;
}

uint32_t tensorboard_masked_crc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

/* protocol buffer pieces into buf; each returns the new length */
static size_t put_varint(unsigned char *buf, size_t at, uint64_t v) {
    do {
        buf[at++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return at;
}

static size_t put_bytes(unsigned char *buf, size_t at, int field, const void *data, size_t len) {
    at = put_varint(buf, at, (uint64_t)field << 3 | 2);
    at = put_varint(buf, at, len);
    memcpy(buf + at, data, len);
    return at + len;
}

static size_t put_fixed(unsigned char *buf, size_t at, int field, int wire_type, const void *value, size_t size) {
    at = put_varint(buf, at, (uint64_t)field << 3 | (uint64_t)wire_type);
    memcpy(buf + at, value, size); /* little-endian hosts (x86-64, aarch64) */
    return at + size;
}

static double wall_time(void) {
    struct timeval now;
    gettimeofday(&now, NULL);
    return (double)now.tv_sec + now.tv_usec / 1e6;
}

/* one TFRecord: length, masked CRC of the length, the data, masked CRC of the data */
static void write_record(tensorboard_events *events, const unsigned char *data, size_t len) {
    uint64_t length = len;
    uint32_t length_crc = tensorboard_masked_crc(tensorboard_crc32c(&length, sizeof length));
    uint32_t data_crc = tensorboard_masked_crc(tensorboard_crc32c(data, len));
    fwrite(&length, sizeof length, 1, events->file);
    fwrite(&length_crc, sizeof length_crc, 1, events->file);
    fwrite(data, 1, len, events->file);
    fwrite(&data_crc, sizeof data_crc, 1, events->file);
    fflush(events->file);
}

static int make_dirs(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s", dir);
    for (char *slash = path + 1; *slash; slash++) {
        if (*slash != '/') continue;
        *slash = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST) return -1;
        *slash = '/';
    }
    return mkdir(path, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

int tensorboard_events_open(tensorboard_events *events, const char *dir, char *err, size_t errlen) {
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    events->file = NULL;
    if (make_dirs(dir) != 0) {
        snprintf(err, errlen, "--tensorboard-dir %s: cannot create it: %s", dir, strerror(errno));
        return -1;
    }
    snprintf(events->path, sizeof events->path, "%.3900s/events.out.tfevents.%lld.%.200s", dir,
             (long long)wall_time(), host);
    events->file = fopen(events->path, "wb");
    if (!events->file) {
        snprintf(err, errlen, "--tensorboard-dir: cannot create %s: %s", events->path, strerror(errno));
        return -1;
    }
    unsigned char buf[64];
    double now = wall_time();
    size_t len = put_fixed(buf, 0, 1, 1, &now, sizeof now);
    len = put_bytes(buf, len, 3, "brain.Event:2", 13);
    write_record(events, buf, len);
    return 0;
}

void tensorboard_events_scalar(tensorboard_events *events, const char *tag, double value, int64_t step) {
    if (!events->file) return;
    unsigned char value_buf[300], summary_buf[320], event_buf[360];
    size_t tag_len = strnlen(tag, 256);
    float simple = (float)value;
    size_t value_len = put_bytes(value_buf, 0, 1, tag, tag_len);
    value_len = put_fixed(value_buf, value_len, 2, 5, &simple, sizeof simple);
    size_t summary_len = put_bytes(summary_buf, 0, 1, value_buf, value_len);
    double now = wall_time();
    size_t len = put_fixed(event_buf, 0, 1, 1, &now, sizeof now);
    len = put_varint(event_buf, len, 2 << 3 | 0);
    len = put_varint(event_buf, len, (uint64_t)step);
    len = put_bytes(event_buf, len, 5, summary_buf, summary_len);
    write_record(events, event_buf, len);
}

void tensorboard_events_close(tensorboard_events *events) {
    if (events->file) fclose(events->file);
    events->file = NULL;
}

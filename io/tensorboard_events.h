/* tensorboard_events.h: a TensorBoard event file of scalars, as torch.utils.tensorboard's
 * SummaryWriter writes it (Megatron's --tensorboard-dir): DIR/events.out.tfevents.TIME.HOST,
 * TFRecord framing (length, masked CRC-32C of the length, an Event protocol buffer, masked CRC-32C
 * of it), a first event holding the file version "brain.Event:2", then one event per scalar
 * (wall time, step, a Summary with one tag and simple_value). */
#ifndef TENSORBOARD_EVENTS_H
#define TENSORBOARD_EVENTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct tensorboard_events {
    FILE *file;
    char path[4200];
} tensorboard_events;

/* creates dir (and its parents) and a new event file in it; 0, or -1 with a message in err */
int tensorboard_events_open(tensorboard_events *events, const char *dir, char *err, size_t errlen);
/* appends the scalar tag = value at step; flushed, so a killed run keeps what it logged */
void tensorboard_events_scalar(tensorboard_events *events, const char *tag, double value, int64_t step);
void tensorboard_events_close(tensorboard_events *events);

/* CRC-32C (Castagnoli) of data and TFRecord's mask of it; exposed for the tests */
uint32_t tensorboard_crc32c(const void *data, size_t len);
uint32_t tensorboard_masked_crc(uint32_t crc);

#endif

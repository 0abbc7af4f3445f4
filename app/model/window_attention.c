/* window_attention.c: see window_attention.h. */
#include "app/model/window_attention.h"
#include "app/model/layer_pattern.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Megatron's tuple_type: the text without its surrounding parentheses, split at commas, each
 * piece an integer (spaces around it allowed); here exactly two */
static int parse_pair(const char *text, int values[2], char *err, size_t errlen) {
    const char *start = text, *end = text + strlen(text);
    while (start < end && (*start == '(' || *start == ')')) start++;
    while (end > start && (end[-1] == '(' || end[-1] == ')')) end--;
    int count = 0;
    for (const char *at = start;;) {
        char *stop;
        errno = 0;
        long value = strtol(at, &stop, 10);
        if (stop == at || stop > end || errno || value < INT_MIN || value > INT_MAX || count == 2) break;
        while (stop < end && isspace((unsigned char)*stop)) stop++;
        values[count++] = (int)value;
        if (stop == end) {
            if (count == 2) return 0;
            break;
        }
        if (*stop != ',') break;
        at = stop + 1;
    }
    snprintf(err, errlen, "--window-size \"%s\": expected two integers LEFT,RIGHT (for example 4096,0; -1 for unbounded)",
             text);
    return -1;
}

int window_attention_configure(gpt_config *c, const char *window_size, const char *skip_freq, int num_layers,
                               char *notice, size_t notice_len, char *err, size_t errlen) {
    if (notice && notice_len) notice[0] = '\0';
    c->window_size_given = 0;
    c->window_left = -1;
    c->window_attn_skip_freq = 0;
    c->window_attn_pattern = 0;
    memset(c->window_attn_layer, 0, sizeof c->window_attn_layer);
    if (!window_size[0]) {
        if (skip_freq[0])
            return snprintf(err, errlen, "--window-attn-skip-freq %s needs --window-size (it says which layers use the "
                            "sliding window)", skip_freq), -1;
        return 0;
    }
    int w[2];
    if (parse_pair(window_size, w, err, errlen)) return -1;
    /* Transformer Engine's check_set_window_size for a causal mask */
    int keep = (w[0] == -1 && w[1] == 0) || (w[0] >= 0 && w[1] == 0);
    int adjust = (w[0] == -1 && w[1] == -1) || (w[0] >= 0 && w[1] != 0);
    if (!keep && !adjust)
        return snprintf(err, errlen, "--window-size %s: window_size should be (-1, 0) or (>=0, 0) for the causal "
                        "attention (Transformer Engine's rule; -1 is unbounded)", window_size), -1;
    if (adjust && notice && notice_len)
        snprintf(notice, notice_len, "WARNING: --window-size (%d, %d): window_size should be (-1, 0) or (>=0, 0) for "
                 "attn_mask_type=causal; using (%d, 0) as Transformer Engine does", w[0], w[1], w[0]);
    c->window_size_given = 1;
    c->window_left = w[0];
    if (!skip_freq[0]) return 0;
    char *end;
    errno = 0;
    long every = strtol(skip_freq, &end, 10);
    while (isspace((unsigned char)*end)) end++;
    if (end != skip_freq && !*end) {
        if (every < 1 || errno || every > INT_MAX)
            return snprintf(err, errlen, "--window-attn-skip-freq %s: an integer must be at least 1 (N: every N-th "
                            "layer has full attention)", skip_freq), -1;
        c->window_attn_skip_freq = (int)every;
        return 0;
    }
    if (num_layers > GPT_MAX_MOE_LAYERS)
        return snprintf(err, errlen, "--window-attn-skip-freq \"%s\": a per-layer pattern covers at most %d layers "
                        "here (--num-layers %d); give an integer", skip_freq, GPT_MAX_MOE_LAYERS, num_layers), -1;
    if (layer_pattern_parse("window-attn-skip-freq", skip_freq, num_layers, c->window_attn_layer, GPT_MAX_MOE_LAYERS,
                            err, errlen))
        return -1;
    c->window_attn_pattern = 1;
    return 0;
}

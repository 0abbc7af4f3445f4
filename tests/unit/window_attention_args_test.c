/* window_attention_args_test.c: Megatron's sliding-window flags into a gpt_config
 * (app/model/window_attention.c) and each layer's window (gpt_layer_window): the tuple forms of
 * Megatron's tuple_type, Transformer Engine's causal rule ((-1,0) and (>=0,0) kept, (-1,-1) and
 * (>=0,!=0) made (LEFT,0) with its warning, the rest refused), and --window-attn-skip-freq as
 * Megatron-Core's is_layer_window_attention reads it (integer N: layer_number % N != 0 windowed;
 * a list: 1 windowed), with every bad value refused by one message naming the flag. */
#include <stdio.h>
#include <string.h>

#include "app/model/window_attention.h"
#include "tests/tap.h"

static gpt_config config;
static char notice[256], err[512];

static int configure(const char *size, const char *skip, int layers) {
    return window_attention_configure(&config, size, skip, layers, notice, sizeof notice, err, sizeof err);
}

/* the windows of layers 0..layers-1 as text, e.g. "8 -1 8 -1" */
static const char *windows(int layers) {
    static char text[256];
    size_t used = 0;
    for (int l = 0; l < layers; l++)
        used += (size_t)snprintf(text + used, sizeof text - used, "%s%d", l ? " " : "", gpt_layer_window(&config, l));
    return text;
}

static void accepted(const char *size, const char *skip, int layers, const char *want, int warned) {
    int rc = configure(size, skip, layers);
    tap_ok(rc == 0 && !strcmp(windows(layers), want) && (notice[0] != 0) == warned,
           "--window-size '%s' --window-attn-skip-freq '%s' over %d layers: windows %s%s (%s)", size, skip, layers, want,
           warned ? ", with TE's warning" : "", rc ? err : notice[0] ? notice : "no warning");
}

static void refused(const char *size, const char *skip, const char *what) {
    int rc = configure(size, skip, 4);
    tap_ok(rc != 0 && strstr(err, what) != NULL, "refused: --window-size '%s' --window-attn-skip-freq '%s' (%s)", size,
           skip, rc ? err : "accepted");
}

int main(void) {
    accepted("", "", 3, "-1 -1 -1", 0);
    accepted("4096,0", "", 2, "4096 4096", 0);
    accepted("(4096, 0)", "", 2, "4096 4096", 0);
    accepted("0,0", "", 1, "0", 0);
    accepted("-1,0", "", 2, "-1 -1", 0);
    accepted("-1,-1", "", 2, "-1 -1", 1);
    accepted("8,8", "", 2, "8 8", 1);
    accepted("8,-1", "", 2, "8 8", 1);
    accepted("8,0", "2", 4, "8 -1 8 -1", 0);
    accepted("8,0", "3", 6, "8 8 -1 8 8 -1", 0);
    accepted("8,0", "1", 3, "-1 -1 -1", 0);
    accepted("8,0", "[1,1,1,0]*2", 8, "8 8 8 -1 8 8 8 -1", 0);
    accepted("8,0", "([0]+[1]*2)", 3, "-1 8 8", 0);
    tap_ok(configure("8,8", "", 1) == 0 &&
               !strcmp(notice, "WARNING: --window-size (8, 8): window_size should be (-1, 0) or (>=0, 0) for "
                               "attn_mask_type=causal; using (8, 0) as Transformer Engine does"),
           "TE's warning text: %s", notice);

    refused("8", "", "expected two integers LEFT,RIGHT");
    refused("8,0,0", "", "expected two integers LEFT,RIGHT");
    refused("8,x", "", "expected two integers LEFT,RIGHT");
    refused(",0", "", "expected two integers LEFT,RIGHT");
    refused("99999999999,0", "", "expected two integers LEFT,RIGHT");
    refused("-2,0", "", "window_size should be (-1, 0) or (>=0, 0)");
    refused("-1,4", "", "window_size should be (-1, 0) or (>=0, 0)");
    refused("", "2", "--window-attn-skip-freq 2 needs --window-size");
    refused("8,0", "0", "an integer must be at least 1");
    refused("8,0", "[1,0,1]", "--window-attn-skip-freq \"[1,0,1]\" gives 3 layers, but --num-layers is 4");
    refused("8,0", "[1,2,1,0]", "--window-attn-skip-freq \"[1,2,1,0]\": expected 0 or 1");
    return tap_done();
}

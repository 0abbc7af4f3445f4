/* compare_params.c: compares two --dump-parameters files tensor by tensor.
 * usage: compare_params A B TOLERANCE [HEADS KV_CHANNELS [QUERY_GROUPS KEY_BIAS_BOUND]]
 * For each tensor of A's index: relative difference max|a - b| / max(max|a|, FLOOR) (max over
 * the tensor; FLOOR from the environment's COMPARE_PARAMS_FLOOR, default 1e-6: a test sets it to
 * the scale its optimizer steps move a parameter, so that a tensor still near its zero
 * initialization, a bias after a few steps, is not judged by its own tiny values);
 * prints the worst tensor; exits 1 when any tensor differs by more than TOLERANCE, 2 on bad
 * input (missing file, different index).
 * With HEADS and KV_CHANNELS, the key part of each QKV bias is held apart: its gradient is zero
 * analytically (adding b to every key adds q.b to a whole row of scores, which softmax ignores),
 * so what it holds after Adam steps is normalized rounding noise that differs with any change
 * of summation order. It must stay at noise level (|value| < 1e-4, or KEY_BIAS_BOUND) instead of
 * matching. With QUERY_GROUPS (grouped-query attention) the bias rows are [group][H/G queries,
 * key, value][d], else [head][q, k, v][d]. T5's cross-attention linear_kv bias, [head][k, v][d], has
 * its key part held apart likewise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *read_all(const char *path, size_t *count) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "compare_params: cannot open %s\n", path); exit(2); }
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *data = malloc((size_t)bytes + 4);
    if (!data || fread(data, 1, (size_t)bytes, f) != (size_t)bytes) { fprintf(stderr, "compare_params: cannot read %s\n", path); exit(2); }
    fclose(f);
    *count = (size_t)bytes / sizeof(float);
    return data;
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 6 && argc != 8) {
        fprintf(stderr, "usage: compare_params A B TOLERANCE [HEADS KV_CHANNELS [QUERY_GROUPS KEY_BIAS_BOUND]]\n");
        return 2;
    }
    double tolerance = atof(argv[3]);
    const char *floor_text = getenv("COMPARE_PARAMS_FLOOR");
    double floor_scale = floor_text && *floor_text ? atof(floor_text) : 1e-6;
    if (!(floor_scale > 0.0)) {
        fprintf(stderr, "compare_params: COMPARE_PARAMS_FLOOR '%s' is not a positive number\n", floor_text);
        return 2;
    }
    int heads = argc >= 6 ? atoi(argv[4]) : 0, kv_channels = argc >= 6 ? atoi(argv[5]) : 0;
    int groups = argc == 8 ? atoi(argv[6]) : heads;
    double key_bias_bound = argc == 8 ? atof(argv[7]) : 1e-4;
    if (heads > 0 && (kv_channels < 1 || groups < 1 || heads % groups)) {
        fprintf(stderr, "compare_params: %d heads do not split into %d query groups (kv channels %d)\n", heads, groups,
                kv_channels);
        return 2;
    }
    /* a bias row's slot in its group's block: the key is slot H/G (multi-head: 1 of q, k, v) */
    const size_t slots = heads > 0 ? (size_t)(heads / groups + 2) : 3, key_slot = slots - 2;
    int noisy_key_bias = 0;
    size_t na, nb;
    float *a = read_all(argv[1], &na), *b = read_all(argv[2], &nb);
    if (na != nb) { fprintf(stderr, "compare_params: %s has %zu values, %s has %zu\n", argv[1], na, argv[2], nb); return 2; }
    char index_path[4096];
    snprintf(index_path, sizeof index_path, "%s.index", argv[1]);
    FILE *index = fopen(index_path, "r");
    if (!index) { fprintf(stderr, "compare_params: cannot open %s\n", index_path); return 2; }
    char name[256], worst_name[256] = "";
    int rows, cols, tensors = 0, bad = 0;
    size_t offset;
    double worst = 0.0;
    while (fscanf(index, "%255s %d %d %zu", name, &rows, &cols, &offset) == 4) {
        size_t n = (size_t)rows * (size_t)(cols ? cols : 1);
        if (offset + n > na) { fprintf(stderr, "compare_params: %s runs past the end of the data\n", name); return 2; }
        double max_abs = 0.0, max_diff = 0.0;
        int is_qkv_bias = heads > 0 && strstr(name, "linear_qkv.bias") != NULL;
        int is_kv_bias = heads > 0 && strstr(name, "cross_attention.linear_kv.bias") != NULL; /* T5: [head][k, v] */
        for (size_t i = offset; i < offset + n; i++) {
            size_t slot = (i - offset) / (size_t)(kv_channels > 0 ? kv_channels : 1);
            if ((is_qkv_bias && slot % slots == key_slot) || (is_kv_bias && slot % 2 == 0)) {
                if (fabs(a[i]) >= key_bias_bound || fabs(b[i]) >= key_bias_bound) noisy_key_bias++;
                continue;
            }
            double d = fabs((double)a[i] - (double)b[i]);
            if (!(d <= max_diff)) max_diff = d; /* NaN counts as a difference */
            if (fabs(a[i]) > max_abs) max_abs = fabs(a[i]);
        }
        double rel = max_diff / (max_abs > floor_scale ? max_abs : floor_scale);
        if (!(rel <= tolerance)) bad++;
        if (!(rel <= worst)) { worst = rel; snprintf(worst_name, sizeof worst_name, "%s", name); }
        tensors++;
    }
    fclose(index);
    printf("%d tensors compared, %d over %g; worst relative difference %.3g (%s)%s\n", tensors, bad, tolerance,
           worst, worst_name[0] ? worst_name : "none", heads ? "; key biases at noise level" : "");
    if (noisy_key_bias) printf("%d key-bias values are not at noise level\n", noisy_key_bias);
    bad += noisy_key_bias;
    free(a);
    free(b);
    return tensors > 0 && bad == 0 ? 0 : 1;
}

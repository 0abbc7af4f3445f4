/* make_hf_fixture.c: test helper for tests/tools/make_hf_fixture.c.
 *   make_hf_fixture write DIR [--untied | --tied-lm-head] [--dtype F32|F16|BF16] [--no-prefix]
 *                             [--attn-buffers] [--shards 2]
 *       a tiny Hugging Face GPT-2 (2 layers, n_embd 64, 4 heads, vocab 300, 32 positions) as
 *       DIR/model.safetensors + DIR/config.json, deterministic values. With F32, layer 0 is
 *       structured so the tests can check layouts: c_attn.weight[i][j] = 1000 j + i,
 *       c_attn.bias[j] = j + 0.5, attn.c_proj.weight[i][j] = 1000 i + j; the rest is random.
 *       --untied adds a random lm_head.weight, --tied-lm-head one equal to wte (a state dict
 *       saved without dropping the tied copy); --attn-buffers adds the attn.bias and
 *       attn.masked_bias buffers older exports carry; --shards 2 deals the tensors round-robin
 *       into model-0000K-of-00002.safetensors with a model.safetensors.index.json, as
 *       transformers saves large models.
 *   make_hf_fixture get FILE.h5 DATASET I [J]     print /model/DATASET[I][J] (%.9g)
 *   make_hf_fixture set-attr FILE.h5 NAME VALUE   set a root int64 attribute
 *   make_hf_fixture set-arg FILE.h5 NAME int:V|real:V|str:V|delete
 *                                                 set the /args attribute NAME (forging what a
 *                                                 checkpoint was saved with), or remove it (one
 *                                                 saved before NAME was recorded)
 *   make_hf_fixture same-values A B               same tensor names and shapes, and values
 *                                                 equal as float32, in two safetensors files */
#include "app/model/hf_gpt2_config.h"
#include "io/hdf5_attributes.h"
#include "io/safetensors.h"

#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { layers = 2, hidden = 64, heads = 4, vocab = 300, positions = 32, ffn = 4 * hidden };

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t next_random(void) {  /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct fixture {
    safetensors_dtype dtype;
    int prefix, structured;
    safetensors_writer *writers[2];
    int shards, num_names;
    char names[96][128];
    int name_shard[96];
    void *buffers[64];
    int num_buffers;
} fixture;

/* a random element of the fixture's dtype, in [-2, 2] away from zero (exact in every dtype) */
static void random_element(safetensors_dtype dtype, unsigned char *out) {
    uint64_t r = next_random();
    uint32_t sign = (uint32_t)(r & 1), exponent = (uint32_t)(r >> 1) % 12, mantissa = (uint32_t)(r >> 8);
    if (dtype == SAFETENSORS_F16) {
        uint16_t h = (uint16_t)(sign << 15 | (exponent + 4) << 10 | (mantissa & 0x3ff));
        memcpy(out, &h, 2);
    } else if (dtype == SAFETENSORS_BF16) {
        uint16_t b = (uint16_t)(sign << 15 | (exponent + 116) << 7 | (mantissa & 0x7f));
        memcpy(out, &b, 2);
    } else {
        uint32_t f = sign << 31 | (exponent + 116) << 23 | (mantissa & 0x7fffff);
        memcpy(out, &f, 4);
    }
}

/* the shard that takes the next tensor (round-robin), remembered for the index */
static safetensors_writer *writer_for(fixture *fx, const char *name) {
    int shard = fx->num_names % fx->shards;
    snprintf(fx->names[fx->num_names], sizeof fx->names[0], "%s", name);
    fx->name_shard[fx->num_names++] = shard;
    return fx->writers[shard];
}

typedef enum { RANDOM, QKV_WEIGHT, QKV_BIAS, PROJ_WEIGHT } pattern;

static void add(fixture *fx, const char *name, int64_t rows, int64_t cols, pattern kind) {
    char full[128], err[1024];
    snprintf(full, sizeof full, "%s%s", fx->prefix && strncmp(name, "lm_head", 7) ? "transformer." : "", name);
    int64_t shape[2] = {rows, cols}, n = rows * (cols ? cols : 1);
    size_t size = safetensors_dtype_size(fx->dtype);
    unsigned char *data = malloc((size_t)n * size);
    for (int64_t e = 0; e < n; e++) {
        int64_t i = cols ? e / cols : e, j = cols ? e % cols : 0;
        float value = 0;
        if (kind == QKV_WEIGHT) value = (float)(1000 * j + i);
        else if (kind == QKV_BIAS) value = (float)i + 0.5f;
        else if (kind == PROJ_WEIGHT) value = (float)(1000 * i + j);
        if (kind == RANDOM) random_element(fx->dtype, data + e * (int64_t)size);
        else memcpy(data + e * (int64_t)size, &value, 4);
    }
    if (safetensors_writer_add(writer_for(fx, full), full, fx->dtype, cols ? 2 : 1, shape, data, err, sizeof err)) {
        fprintf(stderr, "make_hf_fixture: %s\n", err);
        exit(1);
    }
    fx->buffers[fx->num_buffers++] = data;
}

static int write_fixture(int argc, char **argv) {
    const char *dir = argv[2];
    fixture fx = {.dtype = SAFETENSORS_F32, .prefix = 1, .shards = 1};
    int untied = 0, tied_copy = 0, attn_buffers = 0;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--untied")) untied = 1;
        else if (!strcmp(argv[i], "--tied-lm-head")) tied_copy = 1;
        else if (!strcmp(argv[i], "--no-prefix")) fx.prefix = 0;
        else if (!strcmp(argv[i], "--attn-buffers")) attn_buffers = 1;
        else if (!strcmp(argv[i], "--shards") && i + 1 < argc) fx.shards = atoi(argv[++i]) == 2 ? 2 : 1;
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            if (safetensors_dtype_from_name(argv[++i], &fx.dtype)) { fprintf(stderr, "bad dtype\n"); return 2; }
        } else { fprintf(stderr, "make_hf_fixture write: unknown option %s\n", argv[i]); return 2; }
    }
    fx.structured = fx.dtype == SAFETENSORS_F32;
    for (int k = 0; k < fx.shards; k++) {
        fx.writers[k] = safetensors_writer_create();
        safetensors_writer_set_metadata(fx.writers[k], "format", "pt");
    }
    add(&fx, "wte.weight", vocab, hidden, RANDOM);
    add(&fx, "wpe.weight", positions, hidden, RANDOM);
    for (int l = 0; l < layers; l++) {
        char name[96];
        int structured = fx.structured && l == 0;
#define LAYER(suffix) (snprintf(name, sizeof name, "h.%d.%s", l, suffix), name)
        add(&fx, LAYER("ln_1.weight"), hidden, 0, RANDOM);
        add(&fx, LAYER("ln_1.bias"), hidden, 0, RANDOM);
        add(&fx, LAYER("attn.c_attn.weight"), hidden, 3 * hidden, structured ? QKV_WEIGHT : RANDOM);
        add(&fx, LAYER("attn.c_attn.bias"), 3 * hidden, 0, structured ? QKV_BIAS : RANDOM);
        add(&fx, LAYER("attn.c_proj.weight"), hidden, hidden, structured ? PROJ_WEIGHT : RANDOM);
        add(&fx, LAYER("attn.c_proj.bias"), hidden, 0, RANDOM);
        add(&fx, LAYER("ln_2.weight"), hidden, 0, RANDOM);
        add(&fx, LAYER("ln_2.bias"), hidden, 0, RANDOM);
        add(&fx, LAYER("mlp.c_fc.weight"), hidden, ffn, RANDOM);
        add(&fx, LAYER("mlp.c_fc.bias"), ffn, 0, RANDOM);
        add(&fx, LAYER("mlp.c_proj.weight"), ffn, hidden, RANDOM);
        add(&fx, LAYER("mlp.c_proj.bias"), hidden, 0, RANDOM);
        if (attn_buffers) {  /* the causal mask (bool) and its fill value (a 0-d float) */
            static unsigned char mask[positions * positions];
            static float fill_value = -1e4f;
            int64_t mask_shape[4] = {1, 1, positions, positions};
            char full[128], err[1024];
            for (int i = 0; i < positions * positions; i++) mask[i] = i % positions <= i / positions;
            snprintf(full, sizeof full, "%s%s", fx.prefix ? "transformer." : "", LAYER("attn.bias"));
            safetensors_writer_add(writer_for(&fx, full), full, SAFETENSORS_BOOL, 4, mask_shape, mask, err, sizeof err);
            snprintf(full, sizeof full, "%s%s", fx.prefix ? "transformer." : "", LAYER("attn.masked_bias"));
            safetensors_writer_add(writer_for(&fx, full), full, SAFETENSORS_F32, 0, NULL, &fill_value, err, sizeof err);
        }
#undef LAYER
    }
    add(&fx, "ln_f.weight", hidden, 0, RANDOM);
    add(&fx, "ln_f.bias", hidden, 0, RANDOM);
    if (untied) add(&fx, "lm_head.weight", vocab, hidden, RANDOM);
    if (tied_copy) {
        char err[1024];
        int64_t shape[2] = {vocab, hidden};
        safetensors_writer_add(writer_for(&fx, "lm_head.weight"), "lm_head.weight", fx.dtype, 2, shape, fx.buffers[0], err, sizeof err);
    }

    char path[4096], err[4096];
    for (int k = 0; k < fx.shards; k++) {
        if (fx.shards == 1) snprintf(path, sizeof path, "%s/model.safetensors", dir);
        else snprintf(path, sizeof path, "%s/model-%05d-of-%05d.safetensors", dir, k + 1, fx.shards);
        if (safetensors_writer_write(fx.writers[k], path, err, sizeof err)) {
            fprintf(stderr, "make_hf_fixture: %s\n", err);
            return 1;
        }
        safetensors_writer_free(fx.writers[k]);
    }
    if (fx.shards > 1) {
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        FILE *index = fopen(path, "w");
        fprintf(index, "{\n  \"metadata\": {},\n  \"weight_map\": {\n");
        for (int i = 0; i < fx.num_names; i++)
            fprintf(index, "    \"%s\": \"model-%05d-of-%05d.safetensors\"%s\n", fx.names[i],
                    fx.name_shard[i] + 1, fx.shards, i + 1 < fx.num_names ? "," : "");
        fprintf(index, "  }\n}\n");
        fclose(index);
    }
    hf_gpt2_config config = {.vocab_size = vocab, .n_positions = positions, .n_embd = hidden,
                             .n_layer = layers, .n_head = heads, .n_inner = ffn,
                             .layer_norm_epsilon = 1e-5, .tie_word_embeddings = !untied};
    snprintf(config.torch_dtype, sizeof config.torch_dtype, "%s",
             fx.dtype == SAFETENSORS_F16 ? "float16" : fx.dtype == SAFETENSORS_BF16 ? "bfloat16" : "float32");
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (hf_gpt2_config_write(path, &config, err, sizeof err)) {
        fprintf(stderr, "make_hf_fixture: %s\n", err);
        return 1;
    }
    for (int i = 0; i < fx.num_buffers; i++) free(fx.buffers[i]);
    return 0;
}

static int get_element(int argc, char **argv) {
    hid_t file = H5Fopen(argv[2], H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) return 1;
    char name[512];
    snprintf(name, sizeof name, "/model/%s", argv[3]);
    hid_t dataset = H5Dopen2(file, name, H5P_DEFAULT);
    if (dataset < 0) return 1;
    hid_t space = H5Dget_space(dataset);
    int ndim = H5Sget_simple_extent_ndims(space);
    if (ndim != argc - 4) { fprintf(stderr, "%s has %d dimensions\n", name, ndim); return 1; }
    hsize_t start[2] = {0, 0}, count[2] = {1, 1};
    for (int d = 0; d < ndim; d++) start[d] = (hsize_t)atoll(argv[4 + d]);
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL);
    hid_t memspace = H5Screate_simple(1, count, NULL);
    float value;
    if (H5Dread(dataset, H5T_NATIVE_FLOAT, memspace, space, H5P_DEFAULT, &value) < 0) return 1;
    printf("%.9g\n", value);
    H5Sclose(memspace);
    H5Sclose(space);
    H5Dclose(dataset);
    H5Fclose(file);
    return 0;
}

static int set_attribute(char **argv) {
    hid_t file = H5Fopen(argv[2], H5F_ACC_RDWR, H5P_DEFAULT);
    if (file < 0) return 1;
    int64_t value = atoll(argv[4]);
    if (H5Aexists(file, argv[3]) > 0) H5Adelete(file, argv[3]);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate2(file, argv[3], H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    int status = attr < 0 || H5Awrite(attr, H5T_NATIVE_INT64, &value) < 0;
    H5Aclose(attr);
    H5Sclose(space);
    H5Fclose(file);
    return status;
}

static int set_arg(char **argv) {
    hid_t file = H5Fopen(argv[2], H5F_ACC_RDWR, H5P_DEFAULT);
    if (file < 0) return 1;
    hid_t args = H5Gopen2(file, "args", H5P_DEFAULT);
    if (args < 0) return 1;
    if (H5Aexists(args, argv[3]) > 0) H5Adelete(args, argv[3]);
    const char *value = argv[4];
    int status = 0;
    if (!strncmp(value, "int:", 4)) hdf5_write_int_attribute(args, argv[3], atoll(value + 4));
    else if (!strncmp(value, "real:", 5)) hdf5_write_double_attribute(args, argv[3], atof(value + 5));
    else if (!strncmp(value, "str:", 4)) hdf5_write_string_attribute(args, argv[3], value + 4);
    else if (strcmp(value, "delete") != 0) status = 2;
    H5Gclose(args);
    return H5Fclose(file) < 0 ? 1 : status;
}

static int same_values(char **argv) {
    safetensors_file a, b;
    char err[4096];
    if (safetensors_open(argv[2], &a, err, sizeof err) || safetensors_open(argv[3], &b, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (a.num_tensors != b.num_tensors) {
        fprintf(stderr, "%d tensors vs %d\n", a.num_tensors, b.num_tensors);
        return 1;
    }
    for (int i = 0; i < a.num_tensors; i++) {
        const safetensors_tensor *x = &a.tensors[i], *y = safetensors_find(&b, x->name);
        int same = y && x->ndim == y->ndim && x->num_elements == y->num_elements;
        for (int d = 0; same && d < x->ndim; d++) same = x->shape[d] == y->shape[d];
        float *u = malloc(sizeof(float) * (size_t)(x->num_elements + 1));
        float *v = malloc(sizeof(float) * (size_t)(x->num_elements + 1));
        same = same && !safetensors_read_float32(&a, x, u, err, sizeof err) &&
               !safetensors_read_float32(&b, y, v, err, sizeof err) &&
               !memcmp(u, v, sizeof(float) * (size_t)x->num_elements);
        free(u);
        free(v);
        if (!same) {
            fprintf(stderr, "tensor %s differs\n", x->name);
            return 1;
        }
    }
    safetensors_close(&a);
    safetensors_close(&b);
    return 0;
}

int main(int argc, char **argv) {
    const char *command = argc > 1 ? argv[1] : "";
    if (!strcmp(command, "write") && argc >= 3) return write_fixture(argc, argv);
    if (!strcmp(command, "get") && (argc == 5 || argc == 6)) return get_element(argc, argv);
    if (!strcmp(command, "set-attr") && argc == 5) return set_attribute(argv);
    if (!strcmp(command, "same-values") && argc == 4) return same_values(argv);
    if (!strcmp(command, "set-arg") && argc == 5) return set_arg(argv);
    fprintf(stderr, "usage: make_hf_fixture write DIR [options] | get FILE.h5 DATASET I [J] | "
                    "set-attr FILE.h5 NAME VALUE | same-values A B | set-arg FILE.h5 NAME int:V|real:V|str:V|delete\n");
    return 2;
}

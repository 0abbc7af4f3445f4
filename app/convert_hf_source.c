/* convert_hf_source.c: reading a Hugging Face model folder for convert_checkpoint (see
 * convert_hf_source.h). */
#include "app/convert_hf_source.h"

#include "app/core/error.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int convert_exists(const char *path) { struct stat st; return stat(path, &st) == 0; }
int convert_is_folder(const char *path) { struct stat st; return stat(path, &st) == 0 && S_ISDIR(st.st_mode); }

void convert_refuse_existing(const char *path, int overwrite) {
    if (!overwrite && convert_exists(path)) user_error("%s already exists; pass --overwrite to replace it", path);
}

checkpoint_writer *convert_release_writer(const char *save, int overwrite, checkpoint_names *release) {
    char err[error_max];
    if (checkpoint_names_for(release, save, CHECKPOINT_RELEASE, err, sizeof err)) user_error("%s", err);
    convert_refuse_existing(release->file, overwrite);
    convert_refuse_existing(release->tracker, overwrite);
    checkpoint_writer *w = checkpoint_writer_create(save, CHECKPOINT_RELEASE, err, sizeof err);
    if (!w) user_error("%s", err);
    return w;
}

void convert_release_commit(checkpoint_writer *w) {
    char err[error_max];
    checkpoint_write_group_int(w, "rng", "seed", 1234);
    checkpoint_write_group_int(w, "lr_scheduler", "num_steps", 0);
    if (checkpoint_writer_commit(w, err, sizeof err)) user_error("%s", err);
}


static void open_shard(hf_source *s, const char *path) {
    char err[error_max];
    s->files = realloc(s->files, sizeof *s->files * (size_t)(s->num_files + 1));
    s->used = realloc(s->used, sizeof *s->used * (size_t)(s->num_files + 1));
    CHECK(s->files && s->used, "out of memory");
    if (safetensors_open(path, &s->files[s->num_files], err, sizeof err)) user_error("%s", err);
    s->used[s->num_files] = calloc((size_t)s->files[s->num_files].num_tensors + 1, 1);
    CHECK(s->used[s->num_files], "out of memory");
    s->num_files++;
}

/* model.safetensors.index.json: {"weight_map": {"tensor": "file.safetensors", ...}} */
static void open_sharded(hf_source *s, const char *folder, const char *index_path) {
    json_error_t json_error;
    json_t *root = json_load_file(index_path, 0, &json_error);
    if (!root) user_error("%s:%d: not valid JSON: %s", index_path, json_error.line, json_error.text);
    const json_t *map = json_object_get(root, "weight_map");
    if (!json_is_object(map)) user_error("%s: no \"weight_map\" object", index_path);
    const char *name;
    const json_t *file;
    char **opened = NULL;
    int num_opened = 0;
    json_object_foreach((json_t *)map, name, file) {
        if (!json_is_string(file) || strchr(json_string_value(file), '/'))
            user_error("%s: weight_map entry of '%s' is not a file name in the folder", index_path, name);
        int seen = 0;
        for (int i = 0; i < num_opened && !seen; i++) seen = !strcmp(opened[i], json_string_value(file));
        if (seen) continue;
        opened = realloc(opened, sizeof *opened * (size_t)(num_opened + 1));
        CHECK(opened, "out of memory");
        opened[num_opened++] = strdup(json_string_value(file));
        char path[2 * path_max];
        snprintf(path, sizeof path, "%s/%s", folder, json_string_value(file));
        open_shard(s, path);
    }
    for (int i = 0; i < num_opened; i++) free(opened[i]);
    free(opened);
    json_decref(root);
    if (!s->num_files) user_error("%s: the weight_map is empty", index_path);
}

void hf_source_open(const char *input, hf_source *s) {
    memset(s, 0, sizeof *s);
    if (!convert_exists(input)) user_error("%s: %s", input, strerror(errno));
    char folder[path_max];
    if (convert_is_folder(input)) {
        snprintf(folder, sizeof folder, "%s", input);
    } else {  /* a .safetensors file: config.json sits next to it */
        snprintf(folder, sizeof folder, "%s", input);
        char *slash = strrchr(folder, '/');
        if (slash) *slash = 0; else snprintf(folder, sizeof folder, ".");
    }
    snprintf(s->config_path, sizeof s->config_path, "%s/config.json", folder);
    if (!convert_is_folder(input)) {
        open_shard(s, input);
        return;
    }
    char single[path_max + 32], index[path_max + 32];
    snprintf(single, sizeof single, "%s/model.safetensors", folder);
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", folder);
    if (convert_exists(single)) open_shard(s, single);
    else if (convert_exists(index)) open_sharded(s, folder, index);
    else user_error("%s: no model.safetensors (or model.safetensors.index.json) in this folder", input);
}

void hf_source_close(hf_source *s) {
    for (int i = 0; i < s->num_files; i++) {
        safetensors_close(&s->files[i]);
        free(s->used[i]);
    }
    free(s->files);
    free(s->used);
}

/* finds name, or name without its "transformer." prefix (GPT2Model exports), and marks it used */
const safetensors_tensor *hf_source_find(hf_source *s, const char *name, const safetensors_file **in) {
    const char *prefix = "transformer.";
    const char *bare = strncmp(name, prefix, strlen(prefix)) ? NULL : name + strlen(prefix);
    for (int pass = 0; pass < 2; pass++) {
        const char *wanted = pass == 0 ? name : bare;
        if (!wanted) continue;
        for (int f = 0; f < s->num_files; f++) {
            const safetensors_tensor *t = safetensors_find(&s->files[f], wanted);
            if (t) {
                s->used[f][t - s->files[f].tensors] = 1;
                *in = &s->files[f];
                return t;
            }
        }
    }
    return NULL;
}

static const char *shape_text(int ndim, const int64_t *shape, char *buffer, size_t size) {
    size_t used = (size_t)snprintf(buffer, size, "[");
    for (int d = 0; d < ndim && used < size; d++)
        used += (size_t)snprintf(buffer + used, size - used, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (used < size) snprintf(buffer + used, size - used, "]");
    return buffer;
}

const safetensors_tensor *hf_source_checked(hf_source *s, const char *name, int ndim, const int64_t *shape,
                                            const char *config_summary, const safetensors_file **in) {
    char expected[128], found[128];
    const safetensors_tensor *t = hf_source_find(s, name, in);
    if (!t) user_error("%s: no tensor '%s' (nor without a \"transformer.\" prefix); %s", s->files[0].path, name,
                       config_summary);
    int same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = t->shape[d] == shape[d];
    if (!same)
        user_error("%s: tensor '%s' has shape %s, expected %s (%s)", (*in)->path, t->name,
                   shape_text(t->ndim, t->shape, found, sizeof found), shape_text(ndim, shape, expected, sizeof expected),
                   config_summary);
    if (t->dtype != SAFETENSORS_F32 && t->dtype != SAFETENSORS_F16 && t->dtype != SAFETENSORS_BF16 &&
        t->dtype != SAFETENSORS_F64)
        user_error("%s: tensor '%s' is %s; expected F32, F16, BF16 or F64", (*in)->path, t->name,
                   safetensors_dtype_name(t->dtype));
    return t;
}

int hf_source_lm_head_untied(hf_source *s, int64_t vocab, int64_t hidden, const safetensors_tensor *embed,
                             const safetensors_file *embed_file, const char *config_summary) {
    const safetensors_file *file;
    int64_t shape[2] = {vocab, hidden};
    if (!hf_source_find(s, "lm_head.weight", &file)) return 0;
    const safetensors_tensor *head = hf_source_checked(s, "lm_head.weight", 2, shape, config_summary, &file);
    float *a = hf_source_read_float32(embed_file, embed), *b = hf_source_read_float32(file, head);
    int differ = memcmp(a, b, sizeof(float) * (size_t)embed->num_elements) != 0;
    free(a);
    free(b);
    return differ;
}

float *hf_source_read_float32(const safetensors_file *file, const safetensors_tensor *t) {
    char err[error_max];
    float *values = malloc(sizeof(float) * (size_t)(t->num_elements ? t->num_elements : 1));
    CHECK(values, "out of memory reading %s", t->name);
    if (safetensors_read_float32(file, t, values, err, sizeof err)) user_error("%s", err);
    return values;
}


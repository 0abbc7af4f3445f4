/* dataset_index.c: Megatron's GPT document/sample/shuffle indices, drawn from numpy's
 * RandomState (numpy_random.h), and the index cache (see dataset_index.h). */
#include "app/data/dataset_index.h"
#include "app/core/hash.h"
#include "app/core/error.h"
#include "app/data/numpy_random.h"

#include <errno.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static int64_t *alloc_int64(int64_t n) {
    int64_t *p = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    CHECK(p, "out of memory for an index of %lld entries", (long long)n);
    return p;
}

/* _build_document_index without a separate final epoch: documents [first, last) repeated
 * `epochs` times, shuffled as one array */
static void fill_document_index(int64_t *out, int64_t first, int64_t last, int epochs,
                                numpy_random_state *random) {
    int64_t n = last - first, k = 0;
    for (int e = 0; e < epochs; e++)
        for (int64_t d = first; d < last; d++) out[k++] = d;
    numpy_random_shuffle(random, out, (int64_t)epochs * n);
}

void gpt_index_build(const int64_t *lengths, int64_t first, int64_t last, int seq_length,
                     int64_t num_samples_requested, uint64_t seed, gpt_index *out) {
    const int extra = 1;  /* add_extra_token_to_sequence */
    int64_t documents = last - first, tokens_per_epoch = 0;
    for (int64_t d = first; d < last; d++) tokens_per_epoch += lengths[d];
    CHECK(tokens_per_epoch >= 2, "gpt_index_build needs at least 2 tokens");
    CHECK(seed <= 0xffffffffull, "the dataset seed %llu is outside numpy's [0, 2^32)",
          (unsigned long long)seed);

    /* _get_num_epochs (num_samples None: one epoch) */
    int epochs = 1;
    if (num_samples_requested >= 0) {
        int64_t tokens = tokens_per_epoch, requested = num_samples_requested * seq_length + extra;
        while (tokens < requested) { tokens += tokens_per_epoch; epochs++; }
    }

    /* separate the final epoch when less than int(0.80 * samples per epoch) come from it */
    int separate_final_epoch = 0;
    int64_t samples_sans_final = 0;
    if (epochs > 1) {
        samples_sans_final = ((int64_t)(epochs - 1) * tokens_per_epoch - extra) / seq_length;
        int64_t from_final = num_samples_requested - samples_sans_final;
        int64_t per_epoch = (tokens_per_epoch - extra) / seq_length;
        separate_final_epoch = from_final < (int64_t)(0.80 * (double)per_epoch);
    }

    /* one RandomState(seed) per dataset, drawn in Megatron's order: the document index (the
     * first epochs, then the final one), then the shuffle index */
    numpy_random_state random;
    numpy_random_seed(&random, (uint32_t)seed);

    /* _build_document_index */
    out->num_epochs = epochs;
    out->num_documents_index = (int64_t)epochs * documents;
    out->document_index = alloc_int64(out->num_documents_index);
    if (!separate_final_epoch) {
        fill_document_index(out->document_index, first, last, epochs, &random);
    } else {
        fill_document_index(out->document_index, first, last, epochs - 1, &random);
        fill_document_index(out->document_index + (int64_t)(epochs - 1) * documents, first, last,
                            1, &random);
    }

    /* helpers.cpp build_sample_idx with drop_last_partial_sequence */
    int64_t samples = ((int64_t)epochs * tokens_per_epoch - extra) / seq_length;
    int64_t *sample = alloc_int64(2 * (samples + 1));
    int64_t position = 0, offset = 0;
    sample[0] = 0;
    sample[1] = 0;
    for (int64_t s = 1; s <= samples; s++) {
        int64_t remaining = seq_length + extra;
        while (remaining != 0) {
            int64_t doc_length = lengths[out->document_index[position]] - offset;
            remaining -= doc_length;
            if (remaining <= 0) {
                offset += remaining + doc_length - extra;  /* the last token is shared */
                remaining = 0;
            } else {
                if (position == out->num_documents_index - 1) {
                    CHECK(s == samples, "sample index ran out of documents");
                    offset = lengths[out->document_index[position]] - extra;
                    break;
                }
                position++;
                offset = 0;
            }
        }
        sample[2 * s] = position;
        sample[2 * s + 1] = offset;
    }
    out->num_samples = samples;
    out->sample_index = sample;

    /* _build_shuffle_index: [0, sans_final) and [sans_final, samples) shuffled apart */
    out->shuffle_index = alloc_int64(samples);
    for (int64_t i = 0; i < samples; i++) out->shuffle_index[i] = i;
    int64_t first_range = separate_final_epoch ? samples_sans_final : samples;
    numpy_random_shuffle(&random, out->shuffle_index, first_range);
    if (first_range < samples)
        numpy_random_shuffle(&random, out->shuffle_index + first_range, samples - first_range);
}

void gpt_index_free(gpt_index *index) {
    free(index->document_index);
    free(index->sample_index);
    free(index->shuffle_index);
    memset(index, 0, sizeof *index);
}

/* ---- cache ---------------------------------------------------------------------------------- */
static const char cache_magic[8] = {'M', 'T', 'C', 'I', 'D', 'X', '0', '1'};

static uint64_t payload_checksum(const index_arrays *a) {
    uint64_t h = HASH_FNV1A_OFFSET;
    for (int i = 0; i < a->count; i++)
        h = hash_fnv1a(h, a->data[i], sizeof(int64_t) * (size_t)a->length[i]);
    return h;
}

/* header: magic, u64 description length, description, u64 count, u64 lengths[count],
 * u64 checksum; then the arrays */
static int save(const char *path, const char *description, const index_arrays *a) {
    char tmp[4400];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return -1;
    uint64_t n = strlen(description), count = (uint64_t)a->count, checksum = payload_checksum(a);
    int ok = fwrite(cache_magic, 8, 1, f) == 1 && fwrite(&n, 8, 1, f) == 1 &&
             fwrite(description, 1, n, f) == n && fwrite(&count, 8, 1, f) == 1;
    for (int i = 0; ok && i < a->count; i++) ok = fwrite(&a->length[i], 8, 1, f) == 1;
    ok = ok && fwrite(&checksum, 8, 1, f) == 1;
    for (int i = 0; ok && i < a->count; i++)
        ok = fwrite(a->data[i], 8, (size_t)a->length[i], f) == (size_t)a->length[i];
    if (fclose(f) != 0) ok = 0;
    if (!ok || rename(tmp, path) != 0) { remove(tmp); return -1; }
    return 0;
}

/* 0: loaded; 1: no file; -1: present but unusable (reason in why) */
static int load(const char *path, const char *description, index_arrays *a, char *why,
                size_t whylen) {
    FILE *f = fopen(path, "rb");
    if (!f) return 1;
    char magic[8];
    uint64_t n = 0, count = 0, checksum = 0;
    int status = -1;
    char *stored = NULL;
    memset(a, 0, sizeof *a);
    if (fread(magic, 8, 1, f) != 1 || memcmp(magic, cache_magic, 8) != 0) {
        snprintf(why, whylen, "wrong magic");
        goto done;
    }
    if (fread(&n, 8, 1, f) != 1 || n != strlen(description)) {
        snprintf(why, whylen, "its description does not match these parameters");
        goto done;
    }
    stored = malloc(n + 1);
    CHECK(stored, "out of memory");
    if (fread(stored, 1, n, f) != n || memcmp(stored, description, n) != 0) {
        snprintf(why, whylen, "its description does not match these parameters");
        goto done;
    }
    if (fread(&count, 8, 1, f) != 1 || count > 4) {
        snprintf(why, whylen, "truncated or damaged header");
        goto done;
    }
    a->count = (int)count;
    for (int i = 0; i < a->count; i++)
        if (fread(&a->length[i], 8, 1, f) != 1 || a->length[i] < 0 || a->length[i] > (1ll << 40)) {
            snprintf(why, whylen, "truncated or damaged header");
            goto done;
        }
    if (fread(&checksum, 8, 1, f) != 1) { snprintf(why, whylen, "truncated header"); goto done; }
    for (int i = 0; i < a->count; i++) {
        a->data[i] = alloc_int64(a->length[i]);
        if (fread(a->data[i], 8, (size_t)a->length[i], f) != (size_t)a->length[i]) {
            snprintf(why, whylen, "truncated (array %d shorter than its %lld entries)", i,
                     (long long)a->length[i]);
            goto done;
        }
    }
    if (fgetc(f) != EOF) { snprintf(why, whylen, "longer than its header says"); goto done; }
    if (payload_checksum(a) != checksum) { snprintf(why, whylen, "checksum mismatch"); goto done; }
    status = 0;
done:
    fclose(f);
    free(stored);
    if (status != 0) {
        for (int i = 0; i < 4; i++) free(a->data[i]);
        memset(a, 0, sizeof *a);
    }
    return status;
}

/* mkdir -p (Megatron creates --data-cache-path too) */
static int make_directories(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(path, 0777) != 0 && errno != EEXIST) return -1;
            *p = saved;
            if (saved == '\0') return 0;
        }
    }
}

void index_cache_get(const char *cache_dir, const char *kind, const char *description,
                     index_build_fn build, void *context, index_arrays *out, MPI_Comm comm,
                     index_cache_stats *stats, int verbose) {
    int rank;
    CHECK_MPI(MPI_Comm_rank(comm, &rank));
    memset(out, 0, sizeof *out);
    if (!cache_dir || !cache_dir[0]) {
        build(context, out);
        if (rank == 0 && stats) stats->built++;
        return;
    }
    char path[4300], why[256] = "";
    uint64_t hash = hash_fnv1a(HASH_FNV1A_OFFSET, description, strlen(description));
    snprintf(path, sizeof path, "%s/%016llx-%s.cache", cache_dir, (unsigned long long)hash, kind);
    int status = 0;
    if (rank == 0) {
        int found = load(path, description, out, why, sizeof why);
        if (found == 0) {
            if (stats) stats->loaded++;
            if (verbose) printf(" > loaded %s from %s\n", kind, path);
        } else {
            if (found < 0) {
                fprintf(stderr, "%s: warning: cache file %s is unusable (%s); rebuilding it\n",
                        program_name, path, why);
                if (stats) stats->rebuilt++;
            } else if (stats) {
                stats->built++;
            }
            build(context, out);
            if (make_directories(cache_dir) != 0 || save(path, description, out) != 0) status = errno ? errno : EIO;
            else if (verbose) printf(" > built %s and wrote %s\n", kind, path);
        }
    }
    CHECK_MPI(MPI_Bcast(&status, 1, MPI_INT, 0, comm));
    if (status != 0)
        user_error("--data-cache-path %s: cannot write %s: %s", cache_dir, path, strerror(status));
    if (rank != 0) {
        if (load(path, description, out, why, sizeof why) != 0) {
            fprintf(stderr, "[rank %d] %s: warning: cannot read back %s (%s); building locally\n",
                    rank, program_name, path, why);
            build(context, out);
        }
    }
}

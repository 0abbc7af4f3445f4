/* dataset_test.c: MPI test of the GPT datasets (app/gpt_dataset.h), run by tests/mpi/dataset_test.c
 * on 1, 2 and 4 ranks over corpora it prepares in DIR:
 *   a_text_document.h5 + a_mmap.bin/.idx   the same NullTokenizer corpus in both formats; token
 *                                          k of document d is 1000 d + k
 *   b_text_document.h5                     a second corpus, tokens from 500000 up
 * Each rank reads only samples i = rank mod size; rank 0 gathers a hash per sample and writes
 * DIR/samples.SIZE.txt, which the wrapper compares across rank counts. Rank 0 prints TAP.
 *   dataset_test DIR          the checks
 *   dataset_test open PREFIX  just open one corpus (error-message tests) */
#include "app/core/error.h"
#include "app/core/hash.h"
#include "app/data/gpt_dataset.h"
#include "tests/tap.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { seq_length = 32 };
static int rank, size;

static uint64_t hash_tokens(const int32_t *t, int n) {
    uint64_t h = HASH_FNV1A_OFFSET;
    for (int i = 0; i < n; i++) h = hash_fnv1a_word(h, (uint32_t)t[i]);
    return h;
}

static gpt_data_config config(const char *path, const char *cache, const char *split) {
    gpt_data_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.blend.num_paths = 1;
    cfg.blend.paths[0] = path;
    cfg.split = split;
    cfg.seq_length = seq_length;
    cfg.seed = 1234;
    cfg.num_samples[SPLIT_TRAIN] = 3000;  /* several epochs of corpus a */
    cfg.num_samples[SPLIT_VALID] = 40;
    cfg.num_samples[SPLIT_TEST] = 0;   /* 949,50,1 leaves the test split no documents */
    cfg.cache_path = cache;
    return cfg;
}

/* hash of every sample of a split, each rank reading only its own, summed to all ranks */
static uint64_t *sample_hashes(gpt_datasets *ds, int split, int64_t *count) {
    *count = gpt_dataset_num_samples(ds, split);
    uint64_t *hashes = calloc((size_t)*count + 1, sizeof *hashes);
    int32_t tokens[seq_length + 1];
    for (int64_t i = rank; i < *count; i += size) {
        gpt_dataset_sample(ds, split, i, tokens);
        hashes[i] = hash_tokens(tokens, seq_length + 1);
    }
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, hashes, (int)*count, MPI_UINT64_T, MPI_SUM,
                            MPI_COMM_WORLD));
    return hashes;
}

/* a sample is runs of consecutive tokens of one document (1000 d + k, k = 0, 1, ...); every run
 * but the first starts a document; returns 1 when tokens fit that shape */
static int sample_well_formed(const int32_t *t, int base) {
    for (int i = 1; i <= seq_length; i++) {
        int continues = t[i] == t[i - 1] + 1 && (t[i] - base) / 1000 == (t[i - 1] - base) / 1000;
        int starts_document = (t[i] - base) % 1000 == 0;
        if (!continues && !starts_document) return 0;
    }
    return 1;
}

int main(int argc, char **argv) {
    CHECK_MPI(MPI_Init(&argc, &argv));
    program_name = "dataset_test";
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    if (argc == 3 && !strcmp(argv[1], "open")) {
        gpt_data_config cfg = config(argv[2], NULL, "1,0,0");
        cfg.num_samples[SPLIT_TRAIN] = 10;
        cfg.num_samples[SPLIT_VALID] = cfg.num_samples[SPLIT_TEST] = 0;
        gpt_datasets *ds = gpt_datasets_open(&cfg, MPI_COMM_WORLD);
        if (rank == 0) printf("opened %s: %lld train samples\n", argv[2],
                              (long long)gpt_dataset_num_samples(ds, SPLIT_TRAIN));
        gpt_datasets_close(ds);
        MPI_Finalize();
        return 0;
    }
    if (argc != 2) { fprintf(stderr, "usage: dataset_test DIR | open PREFIX\n"); return 2; }
    const char *dir = argv[1];
    char a_h5[4096], a_mmap[4096], b_h5[4096], cache[4096], out[4096];
    snprintf(a_h5, sizeof a_h5, "%s/a_text_document", dir);
    snprintf(a_mmap, sizeof a_mmap, "%s/a_mmap", dir);
    snprintf(b_h5, sizeof b_h5, "%s/b_text_document.h5", dir);
    snprintf(cache, sizeof cache, "%s/cache.%d", dir, size);
    snprintf(out, sizeof out, "%s/samples.%d.txt", dir, size);
    if (rank == 0) mkdir(cache, 0755);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* 1. one corpus, cache built on the first open */
    gpt_data_config cfg = config(a_h5, cache, "949,50,1");
    gpt_datasets *ds = gpt_datasets_open(&cfg, MPI_COMM_WORLD);
    int loaded, built, rebuilt;
    gpt_datasets_cache_counts(ds, &loaded, &built, &rebuilt);
    if (rank == 0) tap_ok(built == 2 && loaded == 0, "first open builds the train and valid index sets (built %d, loaded %d)", built, loaded);
    int64_t first, last, documents = 300;
    int64_t expect[4] = {0, 285, 300, 300};  /* round(.949*300)=285, round(.05*300)=15, 0 */
    int ranges_ok = 1;
    for (int s = 0; s < 3; s++) {
        gpt_dataset_document_range(ds, 0, s, &first, &last);
        ranges_ok &= first == expect[s] && last == expect[s + 1];
    }
    (void)documents;
    /* test split: round(.001*300) = 0 documents would fail, so the test split here is empty:
     * 949,50,1 over 300 documents -> [0,285) [285,300) [300,300) */
    if (rank == 0) tap_ok(ranges_ok, "--split 949,50,1 over 300 documents gives [0,285) [285,300) [300,300)");
    int64_t train_count;
    uint64_t *train = sample_hashes(ds, SPLIT_TRAIN, &train_count);
    if (rank == 0) tap_ok(train_count >= 3000, "train split has at least the 3000 samples asked for (%lld)", (long long)train_count);
    int32_t tokens[seq_length + 1];
    int formed = 1, in_range = 1;
    for (int64_t i = rank; i < train_count; i += size) {
        gpt_dataset_sample(ds, SPLIT_TRAIN, i, tokens);
        formed &= sample_well_formed(tokens, 0);
        for (int k = 0; k <= seq_length; k++) in_range &= tokens[k] / 1000 < 285;
    }
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &formed, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &in_range, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
    if (rank == 0) {
        tap_ok(formed, "every train sample is runs of consecutive document tokens");
        tap_ok(in_range, "train samples only use train documents");
    }
    int64_t valid_count;
    uint64_t *valid = sample_hashes(ds, SPLIT_VALID, &valid_count);
    if (rank == 0) {
        FILE *f = fopen(out, "w");
        for (int64_t i = 0; i < train_count; i++) fprintf(f, "train %lld %016llx\n", (long long)i, (unsigned long long)train[i]);
        for (int64_t i = 0; i < valid_count; i++) fprintf(f, "valid %lld %016llx\n", (long long)i, (unsigned long long)valid[i]);
        fclose(f);
    }
    gpt_datasets_close(ds);

    /* 2. second open reuses the cache; the samples are the same */
    ds = gpt_datasets_open(&cfg, MPI_COMM_WORLD);
    gpt_datasets_cache_counts(ds, &loaded, &built, &rebuilt);
    int64_t count2;
    uint64_t *train2 = sample_hashes(ds, SPLIT_TRAIN, &count2);
    if (rank == 0) {
        tap_ok(loaded == 2 && built == 0 && rebuilt == 0, "second open loads the cache (loaded %d, built %d)", loaded, built);
        tap_ok(count2 == train_count && !memcmp(train, train2, sizeof *train * (size_t)count2), "cached indices give the same samples");
    }
    gpt_datasets_close(ds);
    free(train2);

    /* 3. a corrupted cache file is detected and rebuilt */
    if (rank == 0) {
        char command[8400];
        snprintf(command, sizeof command,
                 "f=$(ls %s/*-GPTDataset-train-sample_index.npy | head -1); printf 'XXXXXXXX' | dd of=\"$f\" bs=1 seek=400 conv=notrunc 2>/dev/null", cache);
        tap_ok(system(command) == 0, "corrupted one cache file");
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    ds = gpt_datasets_open(&cfg, MPI_COMM_WORLD);
    gpt_datasets_cache_counts(ds, &loaded, &built, &rebuilt);
    train2 = sample_hashes(ds, SPLIT_TRAIN, &count2);
    if (rank == 0) {
        tap_ok(rebuilt == 1 && loaded == 1, "the corrupted file is rebuilt (rebuilt %d, loaded %d)", rebuilt, loaded);
        tap_ok(count2 == train_count && !memcmp(train, train2, sizeof *train * (size_t)count2), "rebuilt indices give the same samples");
    }
    gpt_datasets_close(ds);
    free(train2);

    /* 4. the .bin/.idx copy gives the same samples (no cache: built in memory on every rank) */
    gpt_data_config mcfg = config(a_mmap, NULL, "949,50,1");
    ds = gpt_datasets_open(&mcfg, MPI_COMM_WORLD);
    train2 = sample_hashes(ds, SPLIT_TRAIN, &count2);
    if (rank == 0)
        tap_ok(count2 == train_count && !memcmp(train, train2, sizeof *train * (size_t)count2),
               ".bin/.idx reader gives the same %lld samples as the HDF5 reader", (long long)count2);
    gpt_datasets_close(ds);
    free(train2);
    free(train);
    free(valid);

    /* 5. blend 0.3 a (.bin/.idx) + 0.7 b (HDF5) */
    char *words[4] = {"0.3", a_mmap, "0.7", b_h5};
    gpt_data_config bcfg = config(NULL, cache, "98,2,0");
    char err[256];
    CHECK(gpt_blend_set_paths(&bcfg.blend, 4, words, err, sizeof err) == 0, "%s", err);
    bcfg.num_samples[SPLIT_TRAIN] = 1000;
    bcfg.num_samples[SPLIT_VALID] = 20;
    bcfg.num_samples[SPLIT_TEST] = 0;
    ds = gpt_datasets_open(&bcfg, MPI_COMM_WORLD);
    int proportions = 1, sources = 1;
    for (int64_t n = 1; n <= 1000; n++) {
        int64_t from_a = 0;
        for (int64_t i = 0; i < n; i++) from_a += gpt_dataset_sample_source(ds, SPLIT_TRAIN, i) == 0;
        if (n % 50 == 0 || n < 20) proportions &= llabs(from_a * 10 - 3 * n) <= 10;
    }
    for (int64_t i = rank; i < 1000; i += size) {
        gpt_dataset_sample(ds, SPLIT_TRAIN, i, tokens);
        int from_b = tokens[0] >= 500000;
        sources &= from_b == (gpt_dataset_sample_source(ds, SPLIT_TRAIN, i) == 1);
        sources &= sample_well_formed(tokens, from_b ? 500000 : 0);
    }
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &sources, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
    if (rank == 0) {
        tap_ok(gpt_dataset_num_samples(ds, SPLIT_TRAIN) == 1000, "blend has the 1000 samples asked for");
        tap_ok(proportions, "blend 0.3/0.7: dataset a's count is within 1 of 0.3 n for every n checked");
        tap_ok(sources, "each blended sample comes from the dataset the blend index names");
        tap_ok(gpt_datasets_eod(ds) == 1000000 && gpt_datasets_vocab_size(ds) == 1000001,
               "eod and vocabulary come from the HDF5 attributes (%d, %d)", gpt_datasets_eod(ds), gpt_datasets_vocab_size(ds));
    }
    int64_t bsamples;
    uint64_t *blend = sample_hashes(ds, SPLIT_TRAIN, &bsamples);
    if (rank == 0) {
        FILE *f = fopen(out, "a");
        for (int64_t i = 0; i < bsamples; i++) fprintf(f, "blend %lld %016llx\n", (long long)i, (unsigned long long)blend[i]);
        fclose(f);
    }
    free(blend);
    gpt_datasets_close(ds);

    int status = 0;
    if (rank == 0) status = tap_done();
    CHECK_MPI(MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD));
    MPI_Finalize();
    return status;
}

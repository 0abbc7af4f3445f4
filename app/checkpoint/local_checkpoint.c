/* local_checkpoint.c: see local_checkpoint.h. A file's payload, in little-endian int64 words
 * then float32s: version, iteration, owner rank, the layout (6 words), the number of scalars, of
 * the state's shards, fully_parallel, the number of shards saved; the scalars; per saved shard its
 * index, the XXH3 of its tensor's name and its element count; then the saved shards' elements. */
#include "app/checkpoint/local_checkpoint.h"
#include "app/core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

enum { PAYLOAD_VERSION = 1, HEADER_WORDS = 13, MAX_CANDIDATES = 8 };
enum { FILE_OK = 0, FILE_MISSING = 1, FILE_DAMAGED = 2, FILE_OTHER_RUN = 3, FILE_NONE = 4 };

static const char *layout_names[LOCAL_CHECKPOINT_LAYOUT_FIELDS] = {"ranks", "TP", "PP", "DP", "CP", "EP"};

void local_checkpoint_init(local_checkpoint *lc, const char *dir, MPI_Comm comm, int node, int local_rank,
                           const int64_t layout[LOCAL_CHECKPOINT_LAYOUT_FIELDS], MPI_Comm dp_comm, int fully_parallel) {
    memset(lc, 0, sizeof *lc);
    if (strlen(dir) + 64 >= sizeof lc->dir) user_error("--non-persistent-local-ckpt-dir %.64s...: the path is too long", dir);
    snprintf(lc->dir, sizeof lc->dir, "%s", dir);
    lc->comm = comm;
    lc->dp_comm = dp_comm;
    lc->fully_parallel = fully_parallel;
    memcpy(lc->layout, layout, sizeof lc->layout);
    CHECK_MPI(MPI_Comm_rank(comm, &lc->rank));
    CHECK_MPI(MPI_Comm_size(comm, &lc->size));
    CHECK_MPI(MPI_Comm_rank(dp_comm, &lc->dp_rank));
    int mine[2] = {node, local_rank};
    int *places = malloc(sizeof(int) * 2 * (size_t)lc->size);
    lc->holder = malloc(sizeof(int) * (size_t)lc->size);
    CHECK(places && lc->holder, "out of host memory for the local checkpoint's rank table");
    CHECK_MPI(MPI_Allgather(mine, 2, MPI_INT, places, 2, MPI_INT, comm));
    for (int r = 0; r < lc->size; r++)
        if (places[2 * r] + 1 > lc->num_nodes) lc->num_nodes = places[2 * r] + 1;
    /* the holder of r: the same local rank (modulo that node's size) on the next node */
    for (int r = 0; r < lc->size; r++) {
        lc->holder[r] = -1;
        if (lc->num_nodes < 2) continue;
        int next = (places[2 * r] + 1) % lc->num_nodes, next_size = 0;
        for (int q = 0; q < lc->size; q++) next_size += places[2 * q] == next;
        int position = places[2 * r + 1] % next_size;
        for (int q = 0; q < lc->size; q++)
            if (places[2 * q] == next && places[2 * q + 1] == position) lc->holder[r] = q;
    }
    free(places);
}

void local_checkpoint_free(local_checkpoint *lc) {
    free(lc->holder);
    free(lc->found);
    memset(lc, 0, sizeof *lc);
}

static int shard_saved(const local_checkpoint *lc, const int *replicated, int i) {
    return !(lc->fully_parallel && replicated && replicated[i] && lc->dp_rank != 0);
}

static uint64_t name_hash(const sharded_state *state, int i) {
    const char *name = state->tensors[state->shards[i].tensor].name;
    return XXH3_64bits(name, strlen(name));
}

/* the payload's size for state, and the number of shards saved */
static size_t payload_bytes(const local_checkpoint *lc, const sharded_state *state, const int *replicated,
                            int num_scalars, int *saved) {
    size_t floats = 0;
    *saved = 0;
    for (int i = 0; i < state->num_shards; i++)
        if (shard_saved(lc, replicated, i)) {
            (*saved)++;
            floats += tensor_part_elements(&state->shards[i].part);
        }
    return sizeof(int64_t) * (HEADER_WORDS + (size_t)num_scalars + 3 * (size_t)*saved) + sizeof(float) * floats;
}

/* ---- sending bytes over MPI in pieces (a count is an int) ---- */

enum { PIECE = 1 << 30 };

static void post_sends(const unsigned char *data, size_t bytes, int to, MPI_Comm comm, MPI_Request *requests, int *n) {
    for (size_t at = 0; at < bytes; at += PIECE) {
        int count = (int)(bytes - at < PIECE ? bytes - at : PIECE);
        CHECK_MPI(MPI_Isend(data + at, count, MPI_BYTE, to, 0, comm, &requests[(*n)++]));
    }
}

static void post_receives(unsigned char *data, size_t bytes, int from, MPI_Comm comm, MPI_Request *requests, int *n) {
    for (size_t at = 0; at < bytes; at += PIECE) {
        int count = (int)(bytes - at < PIECE ? bytes - at : PIECE);
        CHECK_MPI(MPI_Irecv(data + at, count, MPI_BYTE, from, 0, comm, &requests[(*n)++]));
    }
}

/* MPI_Waitall, one request after the other (MPICH's MPI_STATUSES_IGNORE upsets GCC's bounds checks) */
static void wait_all(int n, MPI_Request *requests) {
    for (int i = 0; i < n; i++) CHECK_MPI(MPI_Wait(&requests[i], MPI_STATUS_IGNORE));
}

static int pieces(size_t bytes) { return (int)((bytes + PIECE - 1) / PIECE) + 1; }

/* the payloads a rank received from the ranks it keeps replicas for: received[o] (malloc'ed) */
typedef struct exchange {
    unsigned char **received;  /* [size] */
    uint64_t *received_bytes;  /* [size] */
} exchange;

/* ranks o with send_to[o] == me send their payload to me; I send mine to send_to[me] (-1: none) */
static void exchange_payloads(const local_checkpoint *lc, const int *send_to, const unsigned char *mine, uint64_t mine_bytes,
                              exchange *ex) {
    int size = lc->size, me = lc->rank;
    ex->received = calloc((size_t)size, sizeof *ex->received);
    ex->received_bytes = calloc((size_t)size, sizeof *ex->received_bytes);
    CHECK(ex->received && ex->received_bytes, "out of host memory");
    /* the sizes first */
    int n = 0, senders = 0;
    for (int o = 0; o < size; o++) senders += send_to[o] == me;
    MPI_Request *requests = malloc(sizeof(MPI_Request) * (size_t)(senders + 1));
    CHECK(requests, "out of host memory");
    for (int o = 0; o < size; o++)
        if (send_to[o] == me) CHECK_MPI(MPI_Irecv(&ex->received_bytes[o], 1, MPI_UINT64_T, o, 1, lc->comm, &requests[n++]));
    if (send_to[me] >= 0) CHECK_MPI(MPI_Isend(&mine_bytes, 1, MPI_UINT64_T, send_to[me], 1, lc->comm, &requests[n++]));
    wait_all(n, requests);
    free(requests);
    int total = send_to[me] >= 0 ? pieces(mine_bytes) : 0;
    for (int o = 0; o < size; o++)
        if (send_to[o] == me) total += pieces(ex->received_bytes[o]);
    requests = malloc(sizeof(MPI_Request) * (size_t)(total + 1));
    CHECK(requests, "out of host memory");
    n = 0;
    for (int o = 0; o < size; o++)
        if (send_to[o] == me) {
            ex->received[o] = malloc(ex->received_bytes[o] ? ex->received_bytes[o] : 1);
            CHECK(ex->received[o], "out of host memory for rank %d's local checkpoint (%.1f MB)", o,
                  (double)ex->received_bytes[o] / 1e6);
            post_receives(ex->received[o], ex->received_bytes[o], o, lc->comm, requests, &n);
        }
    if (send_to[me] >= 0) post_sends(mine, mine_bytes, send_to[me], lc->comm, requests, &n);
    wait_all(n, requests);
    free(requests);
}

static void exchange_free(const local_checkpoint *lc, exchange *ex) {
    for (int o = 0; o < lc->size; o++) free(ex->received[o]);
    free(ex->received);
    free(ex->received_bytes);
}

/* ---- save ---- */

uint64_t local_checkpoint_save(local_checkpoint *lc, int64_t iteration, const int64_t *scalars, int num_scalars,
                               const sharded_state *state, const int *replicated, const kernel_ops *ops) {
    CHECK(num_scalars <= LOCAL_CHECKPOINT_MAX_SCALARS, "too many scalars for a local checkpoint");
    int saved;
    size_t bytes = payload_bytes(lc, state, replicated, num_scalars, &saved);
    unsigned char *payload = malloc(bytes);
    CHECK(payload, "out of host memory for the local checkpoint (%.1f MB)", (double)bytes / 1e6);
    int64_t *words = (int64_t *)payload;
    int64_t header[HEADER_WORDS] = {PAYLOAD_VERSION, iteration, lc->rank};
    memcpy(header + 3, lc->layout, sizeof lc->layout);
    header[9] = num_scalars;
    header[10] = state->num_shards;
    header[11] = lc->fully_parallel;
    header[12] = saved;
    memcpy(words, header, sizeof header);
    memcpy(words + HEADER_WORDS, scalars, sizeof(int64_t) * (size_t)num_scalars);
    int64_t *table = words + HEADER_WORDS + num_scalars;
    float *data = (float *)(table + 3 * saved);
    for (int i = 0, k = 0; i < state->num_shards; i++) {
        if (!shard_saved(lc, replicated, i)) continue;
        size_t n = tensor_part_elements(&state->shards[i].part);
        table[3 * k] = i;
        table[3 * k + 1] = (int64_t)name_hash(state, i);
        table[3 * k + 2] = (int64_t)n;
        if (n) ops->copy_to_host(data, state->shards[i].data, sizeof(float) * n);
        data += n;
        k++;
    }
    ops->synchronize();

    char path[LOCAL_CHECKPOINT_PATH_MAX + 128], err[LOCAL_CHECKPOINT_PATH_MAX + 256];
    local_checkpoint_path(path, sizeof path, lc->dir, lc->rank, iteration, lc->rank);
    if (local_checkpoint_file_write(path, payload, bytes, err, sizeof err) != 0)
        FATAL("rank %d: local checkpoint of iteration %lld: %s", lc->rank, (long long)iteration, err);
    uint64_t written = bytes;
    /* the replicas: every rank sends its bytes to its holder */
    exchange ex;
    exchange_payloads(lc, lc->holder, payload, bytes, &ex);
    free(payload);
    for (int o = 0; o < lc->size; o++) {
        if (lc->holder[o] != lc->rank) continue;
        local_checkpoint_path(path, sizeof path, lc->dir, lc->rank, iteration, o);
        if (local_checkpoint_file_write(path, ex.received[o], ex.received_bytes[o], err, sizeof err) != 0)
            FATAL("rank %d: replica of rank %d's local checkpoint of iteration %lld: %s", lc->rank, o,
                  (long long)iteration, err);
        written += ex.received_bytes[o];
    }
    exchange_free(lc, &ex);
    /* every file of this iteration is written: the older sets can go */
    CHECK_MPI(MPI_Barrier(lc->comm));
    if (local_checkpoint_remove_others(lc->dir, lc->rank, iteration) != 0 )
        fprintf(stderr, "WARNING: rank %d: could not remove every older local checkpoint file in %s/rank_%05d\n",
                lc->rank, lc->dir, lc->rank);
    return written;
}

/* ---- load ---- */

/* FILE_OK when payload is owner's file of iteration for this run, else FILE_OTHER_RUN with why */
static int check_payload(const local_checkpoint *lc, const unsigned char *payload, size_t bytes, int64_t iteration,
                         int owner, const sharded_state *state, const int *replicated, int num_scalars, char *why,
                         size_t whylen) {
    const int64_t *words = (const int64_t *)payload;
    if (bytes < sizeof(int64_t) * HEADER_WORDS || words[0] != PAYLOAD_VERSION)
        return error_format(why, whylen, "an unknown payload version"), FILE_OTHER_RUN;
    if (words[1] != iteration || words[2] != owner)  /* its name and its contents disagree */
        return error_format(why, whylen, "is damaged: it holds rank %lld's iteration %lld", (long long)words[2],
                            (long long)words[1]), FILE_DAMAGED;
    for (int k = 0; k < LOCAL_CHECKPOINT_LAYOUT_FIELDS; k++)
        if (words[3 + k] != lc->layout[k]) {
            char saved[160] = "", now[160] = "";
            size_t a = 0, b = 0;
            for (int j = 0; j < LOCAL_CHECKPOINT_LAYOUT_FIELDS; j++) {
                a += (size_t)snprintf(saved + a, sizeof saved - a, "%s%s %lld", j ? ", " : "", layout_names[j], (long long)words[3 + j]);
                b += (size_t)snprintf(now + b, sizeof now - b, "%s%s %lld", j ? ", " : "", layout_names[j], (long long)lc->layout[j]);
            }
            return error_format(why, whylen, "was saved with another layout (%s; this run: %s): local checkpoints need "
                                "the same layout", saved, now), FILE_OTHER_RUN;
        }
    if (!state) return FILE_OK;  /* a replica: its owner checks the rest once it has it */
    int saved;
    size_t expected = payload_bytes(lc, state, replicated, num_scalars, &saved);
    if (words[9] != num_scalars || words[10] != state->num_shards || words[11] != lc->fully_parallel ||
        words[12] != saved || bytes != expected)
        return error_format(why, whylen, "holds another list of tensors (%lld shards, %zu bytes; this run: %d, %zu%s)",
                            (long long)words[10], bytes, state->num_shards, expected,
                            words[11] != lc->fully_parallel ? "; saved with the other --non-persistent-local-ckpt-algo" : ""),
               FILE_OTHER_RUN;
    const int64_t *table = words + HEADER_WORDS + num_scalars;
    for (int i = 0, k = 0; i < state->num_shards; i++) {
        if (!shard_saved(lc, replicated, i)) continue;
        if (table[3 * k] != i || (uint64_t)table[3 * k + 1] != name_hash(state, i) ||
            table[3 * k + 2] != (int64_t)tensor_part_elements(&state->shards[i].part))
            return error_format(why, whylen, "holds another model: its shard %d is not this run's %s", k,
                                state->tensors[state->shards[i].tensor].name), FILE_OTHER_RUN;
        k++;
    }
    return FILE_OK;
}

/* reads and checks holder's file of owner at iteration; *payload kept when FILE_OK */
static int read_file(const local_checkpoint *lc, int holder, int owner, int64_t iteration, const sharded_state *state,
                     const int *replicated, int num_scalars, unsigned char **payload, size_t *bytes, char *why,
                     size_t whylen) {
    char path[LOCAL_CHECKPOINT_PATH_MAX + 128];
    local_checkpoint_path(path, sizeof path, lc->dir, holder, iteration, owner);
    int missing;
    void *data;
    if (local_checkpoint_file_read(path, &data, bytes, &missing, why, whylen) != 0)
        return missing ? FILE_MISSING : FILE_DAMAGED;
    char reason[600];
    int status = check_payload(lc, data, *bytes, iteration, owner, state, replicated, num_scalars, reason, sizeof reason);
    if (status != FILE_OK) {
        error_format(why, whylen, "%s %s", path, reason);
        free(data);
        return status;
    }
    *payload = data;
    return FILE_OK;
}

static int compare_descending(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

int64_t local_checkpoint_find(local_checkpoint *lc, const sharded_state *state, const int *replicated,
                              int num_scalars, char *why, size_t whylen) {
    int size = lc->size, me = lc->rank;
    free(lc->found);
    lc->found = NULL;
    /* the candidates: every iteration any rank has a file of, newest first */
    int64_t mine[MAX_CANDIDATES];
    for (int k = 0; k < MAX_CANDIDATES; k++) mine[k] = -1;
    local_checkpoint_list_iterations(lc->dir, me, mine, MAX_CANDIDATES);
    int64_t *all = malloc(sizeof(int64_t) * MAX_CANDIDATES * (size_t)size);
    int *status = malloc(sizeof(int) * 2 * (size_t)size);
    CHECK(all && status, "out of host memory");
    CHECK_MPI(MPI_Allgather(mine, MAX_CANDIDATES, MPI_INT64_T, all, MAX_CANDIDATES, MPI_INT64_T, lc->comm));
    int count = MAX_CANDIDATES * size;
    qsort(all, (size_t)count, sizeof all[0], compare_descending);
    int64_t result = -1;
    error_format(why, whylen, "%s holds no local checkpoint", lc->dir);
    for (int c = 0; c < count && all[c] >= 0; c++) {
        int64_t iteration = all[c];
        if (c > 0 && all[c - 1] == iteration) continue;
        /* this rank's own file and the replicas it keeps */
        unsigned char *own = NULL, **replicas = calloc((size_t)size, sizeof *replicas);
        size_t own_bytes = 0, *replica_bytes = calloc((size_t)size, sizeof *replica_bytes);
        CHECK(replicas && replica_bytes, "out of host memory");
        char reason[LOCAL_CHECKPOINT_PATH_MAX + 1024] = "";
        int other_run_here = 0;  /* this rank read a file of another layout or model (reason says why) */
        /* status[2r]: r's own file; status[2r + 1]: r's replica (on its holder); MAX-reduced */
        for (int r = 0; r < 2 * size; r++) status[r] = FILE_OK;
        status[2 * me] = read_file(lc, me, me, iteration, state, replicated, num_scalars, &own, &own_bytes, reason, sizeof reason);
        if (status[2 * me] == FILE_DAMAGED) fprintf(stderr, "WARNING: rank %d: local checkpoint: %s\n", me, reason);
        other_run_here = status[2 * me] == FILE_OTHER_RUN;
        for (int o = 0; o < size; o++) {
            if (lc->holder[o] != me) {
                if (lc->holder[o] < 0) status[2 * o + 1] = FILE_NONE;
                continue;
            }
            char replica_reason[LOCAL_CHECKPOINT_PATH_MAX + 1024];
            status[2 * o + 1] = read_file(lc, me, o, iteration, NULL, replicated, num_scalars, &replicas[o],
                                          &replica_bytes[o], replica_reason, sizeof replica_reason);
            if (status[2 * o + 1] == FILE_DAMAGED)
                fprintf(stderr, "WARNING: rank %d: local checkpoint replica: %s\n", me, replica_reason);
            if (status[2 * o + 1] == FILE_OTHER_RUN && !other_run_here) {
                snprintf(reason, sizeof reason, "%s", replica_reason);
                other_run_here = 1;
            }
        }
        CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, status, 2 * size, MPI_INT, MPI_MAX, lc->comm));
        /* another layout or model: the first rank that says so tells why */
        int other_run = size;
        for (int r = 0; r < size; r++)
            if (status[2 * r] == FILE_OTHER_RUN || status[2 * r + 1] == FILE_OTHER_RUN) { other_run = r; break; }
        if (other_run < size) {
            int says = other_run_here ? me : size, teller;
            CHECK_MPI(MPI_Allreduce(&says, &teller, 1, MPI_INT, MPI_MIN, lc->comm));
            CHECK_MPI(MPI_Bcast(reason, sizeof reason, MPI_CHAR, teller, lc->comm));
            error_format(why, whylen, "the local checkpoint of iteration %lld in %s is not this run's: %s",
                         (long long)iteration, lc->dir, reason);
            free(own);
            for (int o = 0; o < size; o++) free(replicas[o]);
            free(replicas);
            free(replica_bytes);
            break;
        }
        int lost = -1;
        for (int r = 0; r < size && lost < 0; r++)
            if (status[2 * r] != FILE_OK && status[2 * r + 1] != FILE_OK) lost = r;
        if (lost >= 0) {
            if (lc->holder[lost] >= 0)
                error_format(why, whylen, "the local checkpoint of iteration %lld in %s is incomplete: rank %d's file "
                             "(%s) and its replica on rank %d (%s) are both unusable", (long long)iteration, lc->dir, lost,
                             status[2 * lost] == FILE_MISSING ? "missing" : "damaged", lc->holder[lost],
                             status[2 * lost + 1] == FILE_MISSING ? "missing" : "damaged");
            else
                error_format(why, whylen, "the local checkpoint of iteration %lld in %s is incomplete: rank %d's file is "
                             "%s and there is no replica (one node)", (long long)iteration, lc->dir, lost,
                             status[2 * lost] == FILE_MISSING ? "missing" : "damaged");
            if (me == 0) {
                printf("WARNING: %s\n", why);
                fflush(stdout);
            }
            free(own);
            for (int o = 0; o < size; o++) free(replicas[o]);
            free(replicas);
            free(replica_bytes);
            continue;
        }
        /* complete: the holders send the replicas of the ranks whose own file is unusable, one
         * owner after the other (a holder may keep several) */
        for (int o = 0; o < size; o++) {
            if (status[2 * o] == FILE_OK) continue;
            if (me == lc->holder[o]) {
                uint64_t n = replica_bytes[o];
                CHECK_MPI(MPI_Send(&n, 1, MPI_UINT64_T, o, 2, lc->comm));
                MPI_Request requests[64];
                int k = 0;
                CHECK(pieces(n) < 64, "local checkpoint too large to send");
                post_sends(replicas[o], n, o, lc->comm, requests, &k);
                wait_all(k, requests);
            } else if (me == o) {
                uint64_t n;
                CHECK_MPI(MPI_Recv(&n, 1, MPI_UINT64_T, lc->holder[o], 2, lc->comm, MPI_STATUS_IGNORE));
                own = malloc(n ? n : 1);
                CHECK(own, "out of host memory for the local checkpoint's replica (%.1f MB)", (double)n / 1e6);
                MPI_Request requests[64];
                int k = 0;
                post_receives(own, n, lc->holder[o], lc->comm, requests, &k);
                wait_all(k, requests);
                own_bytes = n;
                if (check_payload(lc, own, own_bytes, iteration, me, state, replicated, num_scalars, reason,
                                  sizeof reason) != FILE_OK) {
                    char path[LOCAL_CHECKPOINT_PATH_MAX + 128];
                    local_checkpoint_path(path, sizeof path, lc->dir, lc->holder[o], iteration, me);
                    char text[1024];
                    snprintf(text, sizeof text, "%s", reason);
                    int used = snprintf(reason, sizeof reason, "%s ", path);
                    if (used > 0 && (size_t)used < sizeof reason) snprintf(reason + used, sizeof reason - (size_t)used, "%s", text);
                    other_run_here = 1;
                }
                printf("> rank %d: its local checkpoint file of iteration %lld is %s: using its replica from rank %d\n",
                       me, (long long)iteration, status[2 * me] == FILE_MISSING ? "missing" : "damaged", lc->holder[o]);
                fflush(stdout);
            }
        }
        for (int o = 0; o < size; o++) free(replicas[o]);
        free(replicas);
        free(replica_bytes);
        /* a replica of another layout or model (its holder could not tell) */
        int says = other_run_here ? me : size, teller;
        CHECK_MPI(MPI_Allreduce(&says, &teller, 1, MPI_INT, MPI_MIN, lc->comm));
        if (teller < size) {
            CHECK_MPI(MPI_Bcast(reason, sizeof reason, MPI_CHAR, teller, lc->comm));
            error_format(why, whylen, "the local checkpoint of iteration %lld in %s is not this run's: %s",
                         (long long)iteration, lc->dir, reason);
            free(own);
            break;
        }
        lc->found = own;
        lc->found_bytes = own_bytes;
        result = iteration;
        break;
    }
    free(all);
    free(status);
    return result;
}

void local_checkpoint_restore(local_checkpoint *lc, const sharded_state *state, const int *replicated,
                              int64_t *scalars, int num_scalars, const kernel_ops *ops) {
    CHECK(lc->found, "local_checkpoint_restore without a set found");
    const int64_t *words = (const int64_t *)lc->found;
    memcpy(scalars, words + HEADER_WORDS, sizeof(int64_t) * (size_t)num_scalars);
    int saved = (int)words[12];
    const float *data = (const float *)(words + HEADER_WORDS + num_scalars + 3 * saved);
    for (int i = 0; i < state->num_shards; i++) {
        if (!shard_saved(lc, replicated, i)) continue;
        size_t n = tensor_part_elements(&state->shards[i].part);
        if (n) ops->copy_from_host(state->shards[i].data, data, sizeof(float) * n);
        data += n;
    }
    ops->synchronize();
    if (lc->fully_parallel && replicated) {
        /* the data-parallel replicas: from data-parallel rank 0, which saved them */
        size_t n = 0;
        for (int i = 0; i < state->num_shards; i++)
            if (replicated[i]) n += tensor_part_elements(&state->shards[i].part);
        unsigned long long lowest = n, highest = n;
        CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, lc->dp_comm));
        CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &highest, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, lc->dp_comm));
        CHECK(lowest == highest, "fully_parallel local checkpoint: the data-parallel ranks disagree on their replicated "
              "shards (%llu and %llu elements)", lowest, highest);
        int dp_rank = lc->dp_rank;
        float *buffer = malloc(sizeof(float) * (n ? n : 1));
        CHECK(buffer, "out of host memory");
        float *at = buffer;
        if (dp_rank == 0)
            for (int i = 0; i < state->num_shards; i++) {
                if (!replicated[i]) continue;
                size_t m = tensor_part_elements(&state->shards[i].part);
                if (m) ops->copy_to_host(at, state->shards[i].data, sizeof(float) * m);
                at += m;
            }
        ops->synchronize();
        for (size_t at_element = 0; at_element < n; at_element += PIECE / sizeof(float)) {
            size_t m = n - at_element < PIECE / sizeof(float) ? n - at_element : PIECE / sizeof(float);
            CHECK_MPI(MPI_Bcast(buffer + at_element, (int)m, MPI_FLOAT, 0, lc->dp_comm));
        }
        at = buffer;
        if (dp_rank != 0)
            for (int i = 0; i < state->num_shards; i++) {
                if (!replicated[i]) continue;
                size_t m = tensor_part_elements(&state->shards[i].part);
                if (m) ops->copy_from_host(state->shards[i].data, at, sizeof(float) * m);
                at += m;
            }
        ops->synchronize();
        free(buffer);
    }
    free(lc->found);
    lc->found = NULL;
    lc->found_bytes = 0;
}

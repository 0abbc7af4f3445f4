/* run_text_generation_server.c: Megatron's tools/run_text_generation_server.py: loads a
 * checkpoint (--load, any parallel layout) on one rank, or split over tp x pp ranks
 * (--tensor-model-parallel-size, --pipeline-model-parallel-size; --expert-model-parallel-size for a
 * mixture of experts), and answers PUT /api with
 * generated text (app/inference/generate_api.h: Megatron's request fields, checks and response).
 * Rank 0 serves HTTP (libmicrohttpd, one thread per connection); the connection threads hand
 * each request to the main thread, which runs them one after another (never mixed) and, with
 * several ranks, broadcasts each generation to the others, which follow it in lockstep
 * (generation_lockstep.h). Binds 127.0.0.1 by default (--host, --port; --port 0 picks a free
 * port, printed and written to --port-file). Bodies over --max-request-bytes get 413, other
 * methods 405, other paths 404, bad requests 400 with {"message": ...}; the server keeps
 * serving. SIGINT or SIGTERM to rank 0 stops every rank cleanly; a rank that fails ends the job
 * (MPI_Abort), so no rank waits forever. The model and tokenizer flags of Megatron's server
 * scripts (--num-layers, --hidden-size, --swiglu, --fp16, --use-checkpoint-args, ...) are
 * accepted: checked against the checkpoint, or named as changing nothing (model_flags.h). */
#include "config.h"

#include "app/core/error.h"
#include "app/core/options.h"
#include "app/inference/generate_api.h"
#include "app/inference/generation_lockstep.h"
#include "app/inference/inference_moe.h"
#include "app/inference/inference_setup.h"
#include "app/inference/model_flags.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct server_args {
    char load[1024];
    char host[256];
    int port;
    char port_file[1024];
    char device[16];
    char tokenizer_type[32];
    char vocab_file[1024];
    char merge_file[1024];
    int max_batch_size;
    int inference_max_seq_length;
    int64_t max_tokens_to_oom;
    int64_t max_request_bytes;
    int max_rows;
    uint64_t seed;
    int tensor_model_parallel_size;
    int expert_model_parallel_size;
    int pipeline_model_parallel_size;
    model_flags model;  /* Megatron's model flags, checked against the checkpoint */
} server_args;

#define AT(field) OPTION_AT(server_args, field)
static const option_spec specs[] = {
    {"load", "checkpoint", OPTION_STRING, AT(load), .flags = OPTION_REQUIRED, .metavar = "DIR", .help = "checkpoint directory (its tracker names the file; any parallel layout)"},
    {"tokenizer-type", "tokenizer", OPTION_CHOICE, AT(tokenizer_type), .choices = INFERENCE_TOKENIZER_TYPES, .help = "default: the checkpoint's"},
    {"vocab-file", "tokenizer", OPTION_STRING, AT(vocab_file), .metavar = "PATH", .help = "tokenizer vocabulary"},
    {"merge-file", "tokenizer", OPTION_STRING, AT(merge_file), .metavar = "PATH", .help = "BPE merges (GPT2BPETokenizer)"},
    {"host", "server", OPTION_STRING, AT(host), "127.0.0.1", .metavar = "ADDRESS", .help = "IPv4 address to bind"},
    {"port", "server", OPTION_INT, AT(port), "5000", .range = "[0, 65535]", .help = "TCP port (0: any free port)"},
    {"port-file", "server", OPTION_STRING, AT(port_file), .metavar = "PATH", .help = "write the bound port here once serving"},
    {"max-request-bytes", "server", OPTION_INT64, AT(max_request_bytes), "1048576", .range = "[1, inf)", .help = "larger request bodies get 413"},
    {"device", "generation", OPTION_CHOICE, AT(device), "auto", .choices = "auto|cpu|cuda", .help = "kernel backend"},
    {"max-batch-size", "generation", OPTION_INT, AT(max_batch_size), "16", .range = "[1, 128]", .help = "prompts per request"},
    {"inference-max-batch-size", "generation", OPTION_INT, AT(max_batch_size), "16", .range = "[1, 128]", .help = "Megatron's newer name of --max-batch-size"},
    {"inference-max-seq-length", "generation", OPTION_INT, AT(inference_max_seq_length), .range = "[0, inf)", .help = "prompt + generated tokens (default: --max-position-embeddings of the checkpoint)"},
    {"max-tokens-to-oom", "generation", OPTION_INT64, AT(max_tokens_to_oom), "12000", .range = "[1, inf)", .help = "refuse requests of more prompts x length (Megatron's)"},
    {"inference-max-rows", "generation", OPTION_INT, AT(max_rows), "4096", .range = "[1, inf)", .help = "token rows per forward (longer prefills run in pieces)"},
    {"seed", "generation", OPTION_UINT64, AT(seed), "1234", .help = "seed of requests without random_seed"},
    {"tensor-model-parallel-size", "generation", OPTION_INT, AT(tensor_model_parallel_size), "1", .range = "[1, inf)", .help = "ranks that split each layer (the ranks started are tp x pp; rank 0 serves)"},
    {"pipeline-model-parallel-size", "generation", OPTION_INT, AT(pipeline_model_parallel_size), "1", .range = "[1, inf)", .help = "pipeline stages"},
    {"expert-model-parallel-size", "generation", OPTION_INT, AT(expert_model_parallel_size), "1", .range = "[1, inf)", .help = "ranks that split a mixture of experts' experts (the ranks started are tp x pp x ep)"},
    MODEL_FLAG_SPECS(server_args, model),
    {"seq-length", MODEL_NO_EFFECT_GROUP, OPTION_INT, .range = "[1, inf)", .flags = OPTION_NO_EFFECT, .help = "generation is bounded by --inference-max-seq-length (default: the checkpoint's max_position_embeddings), not by the training sequence length"},
    {"micro-batch-size", MODEL_NO_EFFECT_GROUP, OPTION_INT, .range = "[1, inf)", .flags = OPTION_NO_EFFECT, .help = "each request's prompts are one batch (up to --max-batch-size)"},
};
static const option_table table = {
    "--load DIR [--port N] [options]",
    "Serves text generation from a checkpoint: PUT /api with Megatron's JSON fields.\n",
    specs, (int)(sizeof specs / sizeof specs[0]),
};

/* one request handed from a connection thread to the main thread */
typedef struct job {
    const char *body;
    size_t size;
    char *answer;
    int status;
    int done;
} job;

typedef struct server {
    generator gen;
    tokenizer *tok;
    pthread_mutex_t lock;
    pthread_cond_t changed;  /* a job was posted or finished, or the server is stopping */
    job *pending;            /* the job the main thread runs next (one at a time) */
    int stopping;
    int signal_number;
    int64_t max_request_bytes;
    uint64_t served, refused;
} server;

typedef struct upload {
    char *data;
    size_t size;
    int too_large;
} upload;

static enum MHD_Result respond(struct MHD_Connection *connection, int status, char *json) {
    struct MHD_Response *response = MHD_create_response_from_buffer(strlen(json), json, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(response, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(connection, (unsigned int)status, response);
    MHD_destroy_response(response);
    return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *connection, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls) {
    (void)version;
    server *s = cls;
    upload *u = *con_cls;
    if (!u) { /* the headers: start this request's body */
        u = calloc(1, sizeof *u);
        if (!u) return MHD_NO;
        *con_cls = u;
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (!u->too_large && u->size + *upload_data_size <= (size_t)s->max_request_bytes) {
            char *grown = realloc(u->data, u->size + *upload_data_size);
            if (!grown) return MHD_NO;
            u->data = grown;
            memcpy(u->data + u->size, upload_data, *upload_data_size);
            u->size += *upload_data_size;
        } else {
            u->too_large = 1;
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    char message[256];
    if (strcmp(url, "/api") != 0) {
        snprintf(message, sizeof message, "no resource %s: the API is PUT /api", url);
        return respond(connection, 404, generate_api_message(message));
    }
    if (strcmp(method, "PUT") != 0) {
        snprintf(message, sizeof message, "method %s not allowed: use PUT /api", method);
        return respond(connection, 405, generate_api_message(message));
    }
    if (u->too_large) {
        snprintf(message, sizeof message, "request body larger than %lld bytes (--max-request-bytes)", (long long)s->max_request_bytes);
        return respond(connection, 413, generate_api_message(message));
    }
    /* the main thread runs it: one at a time, with every rank's MPI calls on one thread */
    job j = {u->data ? u->data : "", u->size, NULL, 0, 0};
    pthread_mutex_lock(&s->lock);
    while (s->pending && !s->stopping) pthread_cond_wait(&s->changed, &s->lock);
    if (s->stopping) {
        pthread_mutex_unlock(&s->lock);
        return respond(connection, 503, generate_api_message("the server is stopping"));
    }
    s->pending = &j;
    pthread_cond_broadcast(&s->changed);
    while (!j.done) pthread_cond_wait(&s->changed, &s->lock);
    pthread_mutex_unlock(&s->lock);
    return respond(connection, j.status, j.answer);
}

static void request_done(void *cls, struct MHD_Connection *connection, void **con_cls, enum MHD_RequestTerminationCode code) {
    (void)cls; (void)connection; (void)code;
    upload *u = *con_cls;
    if (u) { free(u->data); free(u); }
    *con_cls = NULL;
}

/* SIGINT and SIGTERM: a handler (whichever thread the signal lands on: libraries start threads
 * of their own, some before main) writes the signal number into a pipe that one thread reads */
static int signal_pipe[2] = {-1, -1};

static void on_stop_signal(int signal_number) {
    unsigned char byte = (unsigned char)signal_number;
    int saved = errno;
    if (write(signal_pipe[1], &byte, 1) < 0) { /* full: a stop is already on its way */ }
    errno = saved;
}

static void install_stop_handler(void) {
    if (pipe(signal_pipe) != 0) FATAL("cannot create the signal pipe");
    fcntl(signal_pipe[1], F_SETFL, O_NONBLOCK);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    if (sigaction(SIGINT, &action, NULL) != 0 || sigaction(SIGTERM, &action, NULL) != 0)
        FATAL("cannot install the SIGINT/SIGTERM handler");
}

/* waits for the stop signal and tells the main thread to stop */
static void *signal_waiter(void *arg) {
    server *s = arg;
    unsigned char byte = 0;
    while (read(signal_pipe[0], &byte, 1) < 0 && errno == EINTR) {}
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    s->signal_number = byte;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* the main thread of rank 0: runs the posted requests until a stop signal */
static void serve(server *s) {
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->pending && !s->stopping) pthread_cond_wait(&s->changed, &s->lock);
        if (!s->pending) break;
        job *j = s->pending;
        pthread_mutex_unlock(&s->lock);
        j->answer = generate_api_handle(&s->gen, s->tok, j->body, j->size, &j->status);
        pthread_mutex_lock(&s->lock);
        if (j->status == 200) s->served++;
        else s->refused++;
        j->done = 1;
        s->pending = NULL;
        pthread_cond_broadcast(&s->changed);
    }
    pthread_mutex_unlock(&s->lock);
}

int main(int argc, char **argv) {
    /* on rank 0 a thread waits for the stop signals; the other ranks note them and stop when
     * rank 0 says so (before MPI_Init, so that no thread of any library dies of them) */
    install_stop_handler();
    int provided;
    CHECK_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided));
    kernels_set_error_handler(error_report_fatal);
    program_name = "run_text_generation_server";
    int world_size;
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world_size));
    server_args a;
    unsigned char given[sizeof specs / sizeof specs[0]];
    options_parse_or_exit(&table, &a, given, argc, argv);
    struct sockaddr_in address;
    memset(&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_port = htons((uint16_t)a.port);
    if (inet_pton(AF_INET, a.host, &address.sin_addr) != 1) user_error("--host %s is not an IPv4 address", a.host);


    const kernel_ops *ops = inference_backend(a.device);
    static inference_model im;
    static server s;
    inference_model_load(&im, a.load, ops, a.seed, a.tensor_model_parallel_size, a.pipeline_model_parallel_size,
                         a.expert_model_parallel_size);
    int rank = inference_model_rank(&im);
    model_flags_check(&table, given, &a.model, &im);
    s.tok = inference_tokenizer(&im, a.tokenizer_type, a.vocab_file, a.merge_file, a.model.tokenizer_model);
    int max_len = a.inference_max_seq_length ? a.inference_max_seq_length : im.model.config.max_position_embeddings;
    generator_create(&s.gen, &im, a.max_batch_size, max_len, a.max_rows, tokenizer_vocab_size(s.tok),
                     tokenizer_eod(s.tok), a.seed, a.max_tokens_to_oom);
    if (!strcmp(tokenizer_type(s.tok), "GPT2BPETokenizer")) {
        int32_t *ids = NULL;
        size_t n = 0, cap = 0;
        if (tokenizer_encode(s.tok, ":", 1, &ids, &n, &cap) == 0 && n > 0) s.gen.colon_id = ids[0];
        n = 0;
        if (tokenizer_encode(s.tok, "\n", 1, &ids, &n, &cap) == 0 && n > 0) s.gen.newline_id = ids[0];
        free(ids);
    }
    s.max_request_bytes = a.max_request_bytes;
    if (rank != 0) {
        /* follow rank 0's generations until it stops */
        long followed = generation_follow(&s.gen);
        printf("> rank %d stopped after following %ld generations\n", rank, followed);
        if (s.gen.inference.pp_group && gpt_inference_last_stage(&s.gen.inference))
            printf("> rank %d, last pipeline stage: %llu bytes of results sent to the other stages\n", rank,
                   (unsigned long long)s.gen.inference.shared_bytes);
        generator_free(&s.gen);
        tokenizer_free(s.tok);
        inference_model_free(&im);
        CHECK_MPI(MPI_Finalize());
        return 0;
    }
    pthread_mutex_init(&s.lock, NULL);
    pthread_cond_init(&s.changed, NULL);

    struct MHD_Daemon *daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG, (uint16_t)a.port, NULL,
        NULL, handle, &s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&address, MHD_OPTION_NOTIFY_COMPLETED, request_done,
        NULL, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)120, MHD_OPTION_END);
    if (!daemon) user_error_local("cannot serve on %s:%d (address in use or not permitted)", a.host, a.port);
    model_flags_report(&table, given);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    int port = info ? (int)info->port : a.port;
    printf("> loaded %s (iteration %lld): %d layers, hidden %d, %d heads, vocabulary %d (%s), %s backend, "
           "%d ranks (tp %d, pp %d)\n", im.path, (long long)im.iteration, im.model.config.num_layers,
           im.model.config.hidden_size, im.model.config.num_attention_heads, tokenizer_vocab_size(s.tok),
           tokenizer_type(s.tok), ops->name, world_size, a.tensor_model_parallel_size, a.pipeline_model_parallel_size);
    inference_moe_report(&im.model.config, im.moe_capacity_factor);
    printf("> serving on http://%s:%d/api (PUT; up to %d prompts, %d tokens each; process %ld stops on SIGINT or SIGTERM)\n",
           a.host, port, a.max_batch_size, max_len, (long)getpid());
    fflush(stdout);
    if (a.port_file[0]) {
        char tmp[1100];
        snprintf(tmp, sizeof tmp, "%s.tmp", a.port_file);
        FILE *f = fopen(tmp, "w");
        if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0 || rename(tmp, a.port_file) != 0)
            user_error_local("--port-file %s: cannot write it", a.port_file);
    }
    pthread_t waiter;
    if (pthread_create(&waiter, NULL, signal_waiter, &s) != 0) FATAL("cannot start the signal-waiting thread");
    serve(&s);
    pthread_join(waiter, NULL);
    MHD_stop_daemon(daemon);
    generation_lockstep_stop(&s.gen);
    printf("> stopped by signal %d after %llu answered and %llu refused requests\n", s.signal_number,
           (unsigned long long)s.served, (unsigned long long)s.refused);
    generator_free(&s.gen);
    tokenizer_free(s.tok);
    inference_model_free(&im);
    CHECK_MPI(MPI_Finalize());
    return 0;
}

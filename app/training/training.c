/* training.c: see training.h. One iteration, as data:
 *   sample indices (seed, consumed samples) -> micro-batches -> the pipeline schedule runs
 *   forward/backward through this rank's chunks, gradients accumulating in the flat buffer ->
 *   data-parallel reduction (buckets) -> global norm and clipping -> AdamW -> parameter gather
 *   (distributed optimizer) -> log line.
 * Micro-batch m of data-parallel rank r holds global-batch samples
 * [m*B*dp + r*B, m*B*dp + r*B + B) (Megatron's pretraining sampler), so a sample's place in the
 * global batch, its tokens and its dropout masks do not depend on the parallel layout. */
#include "config.h"

#include "app/training/training.h"
#include "io/corpus_check.h"
#include "app/training/memory_estimate.h"
#include "app/training/checkpointing.h"
#include "app/training/non_persistent_checkpoint.h"
#include "app/training/batch_check.h"
#include "app/training/data_setup.h"
#include "app/core/error.h"
#include "app/core/process_start.h"
#include "app/training/exit_signal.h"
#include "app/training/nan_check.h"
#include "app/parallel/timeout.h"
#include "app/data/mock_data.h"
#include "app/training/param_dump.h"
#include "app/training/pipeline_schedule.h"
#include "app/training/train_timers.h"
#include "app/model/moe_expert_bias.h"
#include "app/model/fp8_linear.h"
#include "app/model/moe_layer.h"
#include "app/model/moe_shared_expert.h"
#include "perf/metrics/flops.h"
#include "perf/metrics/papi_phases.h"

#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --cp-comm-type (validated by args): one type for every layer, or one per layer */
static void cp_comm_types(const args *a, gpt_config *c) {
    char copy[sizeof a->cp_comm_type];
    snprintf(copy, sizeof copy, "%s", a->cp_comm_type);
    int count = 0;
    for (char *save = NULL, *word = strtok_r(copy, " ", &save); word && count < GPT_MAX_MOE_LAYERS;
         word = strtok_r(NULL, " ", &save))
        c->cp_comm_type[count++] = !strcmp(word, "allgather") ? CP_COMM_ALLGATHER
                                  : !strcmp(word, "a2a")     ? CP_COMM_A2A
                                  : !strcmp(word, "a2a+p2p") ? CP_COMM_A2A_P2P
                                                             : CP_COMM_P2P;
    for (int l = count; count == 1 && l < a->num_layers && l < GPT_MAX_MOE_LAYERS; l++) c->cp_comm_type[l] = c->cp_comm_type[0];
    c->cp_a2a_size = a->hierarchical_cp_sizes[0];
}

static gpt_config config_from_args(const args *a, const topology *topo) {
    gpt_config c;
    memset(&c, 0, sizeof c);
    c.num_layers = a->num_layers;
    c.hidden_size = a->hidden_size;
    c.num_attention_heads = a->num_attention_heads;
    c.kv_channels = a->kv_channels;
    c.ffn_hidden_size = a->ffn_hidden_size;
    c.padded_vocab_size = a->padded_vocab_size;
    c.max_position_embeddings = a->max_position_embeddings;
    c.seq_length = a->seq_length / topo->cp_size;  /* the rows of a sequence held here */
    c.micro_batch_size = a->micro_batch_size;
    c.layernorm_epsilon = a->layernorm_epsilon;
    c.init_method_std = a->init_method_std;
    c.hidden_dropout = a->hidden_dropout;
    c.attention_dropout = a->attention_dropout;
    c.untie_embeddings_and_output_weights = a->untie_embeddings_and_output_weights;
    gpt_config_set_architecture(&c, a);
    c.seed = a->seed;
    c.tp_size = topo->tp_size;
    c.tp_rank = topo->tp_rank;
    c.ep_size = topo->ep_size;
    c.ep_rank = topo->ep_rank;
    c.expert_dp_rank = topo->expert_dp_rank;
    c.ep_group = topo->ep;
    c.etp_size = topo->etp_size;
    c.etp_rank = topo->etp_rank;
    c.sequence_parallel = a->sequence_parallel;
    c.tp_comm_overlap = a->tp_comm_overlap;
    c.tp_comm_overlap_disable_ag = a->disable_tp_comm_overlap_ag;
    c.tp_comm_overlap_disable_rs = a->disable_tp_comm_overlap_rs;
    c.pp_size = topo->pp_size;
    c.pp_rank = topo->pp_rank;
    c.virtual_stages = a->virtual_pipeline_model_parallel_size;
    c.activation_slots = pipeline_activation_slots(topo->pp_size, c.virtual_stages, a->num_micro_batches);
    c.bucket_size = a->ddp_bucket_size;
    /* buckets split evenly over the data-parallel ranks and the experts' over the
     * expert-data-parallel ones (a divisor of them unless the experts' tensor-parallel size
     * differs: then both) */
    c.bucket_alignment = topo->dp_cp->size;
    while (c.bucket_alignment % topo->expert_dp_size) c.bucket_alignment += topo->dp_cp->size;
    c.cp_size = topo->cp_size;
    c.cp_rank = topo->cp_rank;
    c.cp_group = topo->cp;
    cp_comm_types(a, &c);
    c.recompute_selective = args_recompute_module(a, "core_attn");
    c.recompute_layernorm = args_recompute_module(a, "layernorm");
    c.recompute_moe_act = args_recompute_module(a, "moe_act");
    c.recompute_moe = args_recompute_module(a, "moe");
    c.recompute_shared_experts = args_recompute_module(a, "shared_experts");
    if (!strcmp(a->recompute_granularity, "full"))
        c.recompute_method = !strcmp(a->recompute_method, "block") ? RECOMPUTE_METHOD_BLOCK : RECOMPUTE_METHOD_UNIFORM;
    c.recompute_num_layers = a->recompute_num_layers;
    c.keep_mlp_activation_layers = a->keep_mlp_activation_num_layers > 0 ? a->keep_mlp_activation_num_layers
                                   : a->keep_mlp_activation            ? INT_MAX
                                                                        : 0;
    c.loss_chunk_rows = a->cross_entropy_chunk_rows;
    c.memory_efficient_layer_norm = a->memory_efficient_layer_norm;
    c.t5 = a->t5;
    if (a->t5) {  /* the encoder's layers, then the decoder's; seq_length is the encoder's */
        c.num_layers = a->num_layers + a->decoder_num_layers;
        c.t5_encoder_layers = a->num_layers;
        c.t5_encoder_seq_length = a->seq_length;
        c.t5_decoder_seq_length = a->decoder_seq_length;
    }
    c.bert = a->bert;
    c.bert_binary_head = a->bert && !a->bert_no_binary_head && !a->bert_task;
    if (a->bert_task) {  /* MNLI: 3 classes, one row per sample; RACE: one logit per choice, 4 rows per sample */
        int race = !strcmp(a->task, "RACE");
        c.bert_task_outputs = race ? 1 : 3;
        c.bert_task_choices = race ? 4 : 1;
    }
    return c;
}

/* open the corpora: Megatron's GPT datasets over our HDF5 corpora or .bin/.idx files */
static void open_datasets(trainer *t, const args *a) {
    t->data = data_setup_open(a, t->topo.world_rank == 0, 1, MPI_COMM_WORLD, &t->data_words);
    int corpus_vocab = gpt_datasets_vocab_size(t->data);
    /* a corpus recorded with a vocabulary larger than the model's was made with another tokenizer.
     * Not so for pretrain_bert/finetune_bert and pretrain_t5: their corpora record our WordPiece
     * tokenizer's size, the file + [BOS] + [EOS] (Megatron's legacy tokenizer), while the model's
     * vocabulary is Megatron-Core's BertTokenizer's, which has neither (and sentence-split text
     * never holds them); there every id was checked at the door against that tokenizer's
     * vocabulary (data_setup_open: corpus_check_all), the check that counts. */
    if (corpus_vocab > a->padded_vocab_size && !a->bert && !a->t5)
        user_error("the corpus in --data-path has a vocabulary of %d tokens but the model's is %d (padded %d): "
                   "check --tokenizer-type / --vocab-size", corpus_vocab, a->vocab_size, a->padded_vocab_size);
    if (a->eval_iters > 0 && gpt_dataset_num_samples(t->data, SPLIT_VALID) == 0 && t->topo.world_rank == 0)
        printf("> no validation dataset (--split gives it no weight): no evaluation\n");
    if (a->eval_iters > 0 && gpt_dataset_num_samples(t->data, SPLIT_TEST) == 0 && t->topo.world_rank == 0)
        printf("> no test dataset (--split gives it no weight or no documents): no test evaluation\n");
    int64_t needed[GPT_DATA_SPLITS];
    data_setup_num_samples(a, needed);
    if (gpt_dataset_num_samples(t->data, SPLIT_TRAIN) < needed[SPLIT_TRAIN])
        user_error("the train split holds %lld samples, fewer than the %lld this run trains on (an unweighted "
                   "blend holds one epoch of each corpus: give weights, or train on fewer samples)",
                   (long long)gpt_dataset_num_samples(t->data, SPLIT_TRAIN), (long long)needed[SPLIT_TRAIN]);
}

/* the topology's process groups (at most 12), for attaching and detaching the communication backend */
static int topology_groups(topology *topo, comm_group **groups) {
    int count = 0;
    comm_group *all[] = {&topo->world, &topo->tp, &topo->pp, &topo->dp, &topo->model_parallel, &topo->embedding};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->mpi != MPI_COMM_NULL) groups[count++] = all[i];
    if (topo->cp_size > 1) {  /* context parallelism's ring, and the replicas with it */
        groups[count++] = &topo->cp_own;
        groups[count++] = &topo->dp_cp_own;
    }
    if (topo->expert_groups_own) {  /* the expert groups of a mixture of experts over expert-parallel ranks */
        groups[count++] = &topo->ep_own;
        groups[count++] = &topo->expert_dp_own;
        groups[count++] = &topo->expert_model_parallel_own;
    }
    if (topo->expert_tp_dp_is_own) groups[count++] = &topo->expert_tp_dp_own;
    return count;
}

/* MPI for host-memory backends; NCCL for device memory */
static const comm_ops *select_comm(const kernel_ops *ops) {
    if (ops->host_memory) return comm_mpi();
#ifdef HAVE_CUDA
    return comm_nccl();
#else
    FATAL("backend %s needs a device communication library, and this build has none", ops->name);
#endif
}

/* test hook: MTC_FAULT_GRAD_INF="ITER@RANK,..." writes +inf into one gradient element that
 * RANK's optimizer updates, after the gradient reduction of iteration ITER (1-based), so that a
 * test makes an overflow happen where it chooses, whatever the arithmetic of the machine, and
 * checks that every rank skips that step (tests/mpi/fp16_test.sh) */
static void fault_inject_grad_overflow(const trainer *t, gpt_model *model, int64_t iteration) {
    const char *spec = getenv("MTC_FAULT_GRAD_INF");
    if (!spec) return;
    for (const char *p = spec; *p;) {
        long long it = 0;
        int rank = -1, used = 0;
        if (sscanf(p, "%lld@%d%n", &it, &rank, &used) != 2)
            user_error("MTC_FAULT_GRAD_INF=%s: expected ITER@RANK[,ITER@RANK...] at \"%s\"", spec, p);
        p += used;
        if (*p == ',') p++;
        if (it != iteration || rank != t->topo.world_rank) continue;
        const tensor_range *r = t->opt.num_update_ranges ? &t->opt.update_ranges[0]
                                : t->opt.num_embedding_ranges ? &t->opt.embedding_ranges[0] : NULL;
        if (!r) return;
        float inf = INFINITY;
        model->ops->copy_from_host(model->grad_buffer + r->offset, &inf, sizeof inf);
    }
}

/* --papi-events: resolve the names (a bad one ends the run with one message), count on every
 * rank the events every rank can count, or go on without counters after one line. On a GPU a
 * cuda::: event counts this rank's GPU (the node-local rank's, as select_backend chose). */
static void papi_setup(trainer *t, const args *a) {
    char note[1024], err[1024], start_note[1024] = "";
    unsigned available;
    int gpu_device = strcmp(a->device, "cuda") == 0 ? t->topo.local_rank : -1;
    if (papi_phases_open(a->papi_events, gpu_device, &available, note, sizeof note, err, sizeof err))
        user_error("%s", err);
    if (t->topo.world_rank == 0 && note[0]) printf("> %s\n", note);
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &available, 1, MPI_UNSIGNED, MPI_BAND, MPI_COMM_WORLD));
    /* start what every rank can count: a rank that cannot start some narrows the set for all */
    unsigned counted = available, everywhere;
    for (;;) {
        everywhere = papi_phases_start(counted, note, sizeof note);
        if (note[0] && !start_note[0]) snprintf(start_note, sizeof start_note, "%s", note);
        CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &everywhere, 1, MPI_UNSIGNED, MPI_BAND, MPI_COMM_WORLD));
        if (everywhere == counted) break;
        counted = everywhere;
    }
    if (counted != available && t->topo.world_rank == 0)
        printf("> %s\n", start_note[0] ? start_note : "PAPI cannot count some of these events on some rank: training goes on without them");
    phase_counts *totals = &t->papi_totals;
    totals->num_events = papi_phases_num_events();
    totals->ranks = t->topo.world_size;
    for (int e = 0; e < totals->num_events; e++) totals->event_names[e] = papi_phases_event_name(e);
    fflush(stdout);
}

/* --papi-sample-interval N (0: --log-interval): before an iteration, count it when its number is
 * a multiple of N, else stop the event sets (papi_phases_pause) until one is */
static void papi_sample(trainer *t) {
    if (!t->papi_totals.num_events) return;
    const args *a = t->args;
    int64_t every = a->papi_sample_interval > 0 ? a->papi_sample_interval : a->log_interval;
    int counted = every <= 1 || (t->iteration + 1) % every == 0;
    papi_phases_pause(!counted);
    t->papi_sampled += counted;
}

/* the PAPI counts since the last call, summed over ranks on rank 0, added to the run's totals
 * (under --distributed-timeout-minutes, as every collective of the training loop) */
static void papi_collect(trainer *t, phase_counts *interval) {
    *interval = t->papi_totals;
    interval->iterations = t->papi_sampled;
    t->papi_totals.iterations += t->papi_sampled;
    t->papi_sampled = 0;
    papi_phases_take(interval->counts);
    int n = PHASE_COUNT * PAPI_PHASES_MAX_EVENTS;
    MPI_Request request;
    CHECK_MPI(MPI_Ireduce(t->topo.world_rank == 0 ? MPI_IN_PLACE : interval->counts, interval->counts, n,
                          MPI_LONG_LONG, MPI_SUM, 0, t->topo.world.mpi, &request));
    comm_timed_wait(&request, "reduce (PAPI counts)", t->topo.world.name, t->topo.world.mpi);
    for (int i = 0; i < n; i++) t->papi_totals.counts[i] += interval->counts[i];
}

/* test hooks (tests/mpi/fault_injection_test.sh, tests/mpi/local_checkpoint_test.sh,
 * tests/mpi/restart_test.sh): MTC_FAULT_STOP_AT_LOG=R:ITER stops world rank R (SIGSTOP),
 * MTC_FAULT_KILL_AT_LOG=R:ITER kills it (SIGKILL), at the log line of iteration ITER, before its
 * collectives. Under jobs/run_with_restarts they fire in the first attempt only
 * (MTC_RESTART_ATTEMPT unset or 0), unless the spec ends in ":every-attempt". */
static void fault_at_log(const char *variable, int signal_number, int world_rank, int64_t iteration) {
    const char *spec = getenv(variable), *attempt = getenv("MTC_RESTART_ATTEMPT");
    int rank, used = 0;
    long long at;
    if (!spec || sscanf(spec, "%d:%lld%n", &rank, &at, &used) != 2 || rank != world_rank || at != iteration) return;
    if (strcmp(spec + used, ":every-attempt") != 0 && attempt && atoi(attempt) != 0) return;
    raise(signal_number);
}

static void fault_stop_at_log(int world_rank, int64_t iteration) {
    fault_at_log("MTC_FAULT_STOP_AT_LOG", SIGSTOP, world_rank, iteration);
    fault_at_log("MTC_FAULT_KILL_AT_LOG", SIGKILL, world_rank, iteration);
}

/* when the job started, for --exit-duration-in-mins: Slurm's SLURM_JOB_START_TIME (a requeued
 * job's own start, the same on every rank) where it is set and earlier, else process_start (the
 * earliest rank's process start: Megatron's _TRAIN_START_TIME) */
static double job_start_time(double process_start) {
    const char *slurm = getenv("SLURM_JOB_START_TIME");
    char *end;
    double slurm_start = slurm ? strtod(slurm, &end) : 0;
    if (slurm && end != slurm && !*end && slurm_start > 0 && slurm_start <= process_start) return slurm_start;
    return process_start;
}

/* seconds since the earliest rank's process start */
static double since_start(const trainer *t) { return wall_clock_now() - t->startup.process_start; }

/* Megatron's print_datetime: every rank reaches the point (a barrier under
 * --distributed-timeout-minutes), rank 0 prints the time */
static void print_datetime(const trainer *t, const char *what) {
    t->comm->barrier(&t->topo.world);
    if (t->topo.world_rank == 0) train_log_datetime(what);
}

/* Megatron's set-up timers, as it prints them before training: "(min, max) time across ranks (ms)"
 * of building the model and optimizer (initialization included) and opening the datasets; the
 * slowest rank's go into the start-up figures */
static void report_setup_times(trainer *t, double model_seconds, double data_seconds) {
    double mins[2] = {model_seconds, data_seconds}, maxs[2] = {model_seconds, data_seconds};
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, mins, 2, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, maxs, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    t->startup.model_setup = maxs[0];
    t->startup.data_setup = maxs[1];
    if (t->topo.world_rank != 0) return;
    const char *names[2] = {"model-and-optimizer-setup", "train/valid/test-data-iterators-setup"};
    printf("(min, max) time across ranks (ms):\n");
    for (int i = 0; i < 2; i++) {
        char label[64];
        snprintf(label, sizeof label, "%s ", names[i]);
        size_t used = strlen(label);
        while (used < 48) label[used++] = '.';
        label[used] = '\0';
        printf("    %s: (%.2f, %.2f)\n", label, 1000.0 * mins[i], 1000.0 * maxs[i]);
    }
    fflush(stdout);
}

void trainer_setup(trainer *t, const args *a, const kernel_ops *ops) {
    memset(t, 0, sizeof *t);
    t->args = a;
    t->startup.process_start = process_start_time();
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &t->startup.process_start, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD));
    t->job_start = job_start_time(t->startup.process_start);
    comm_timeout_init(60.0 * a->distributed_timeout_minutes, a->heartbeat_interval);
    t->comm = select_comm(ops);
    parallel_layout layout = {a->tensor_model_parallel_size, a->pipeline_model_parallel_size,
                              a->data_parallel_size, "", a->expert_model_parallel_size, 0,
                              a->context_parallel_size, a->expert_tensor_parallel_size};
    snprintf(layout.order, sizeof layout.order, "%s", a->parallel_order);
    topology_create(&t->topo, &layout);
    topology_print(&t->topo, a->device);
    memory_estimate_check(a, &t->topo, ops);
    if (a->papi_events[0]) papi_setup(t, a);
    char device_label[32] = "cpu";
    if (strcmp(a->device, "cuda") == 0) snprintf(device_label, sizeof device_label, "cuda:%d", t->topo.local_rank);
    straggler_setup(&t->straggler, a->log_straggler, a->disable_straggler_on_startup, a->straggler_minmax_count,
                    device_label, t->topo.world.mpi);
    comm_group *groups[12];
    int num_groups = topology_groups(&t->topo, groups);
    for (int i = 0; i < num_groups; i++) t->comm->attach(groups[i]);
    t->startup.initialized = since_start(t);
    if (t->topo.world_rank == 0) printf("time to initialize megatron (seconds): %.3f\n", t->startup.initialized);
    print_datetime(t, "after megatron is initialized");
    double data_start = MPI_Wtime();
    if (!a->mock_data && !a->bert_task) open_datasets(t, a);  /* finetune_bert: its task source */
    double data_seconds = MPI_Wtime() - data_start, model_start = MPI_Wtime();
    gpt_config config = config_from_args(a, &t->topo);
    /* --deterministic-mode: gradients and loss summed in one order at any data-parallel size
     * (app/optim/fixed_tree_reduce.h); its norm blocks need the buckets padded alike at every size */
    const char *no_tree =
        a->deterministic_mode ? fixed_tree_unsupported(ops, t->topo.dp_size, t->topo.cp_size, a->num_experts) : "";
    if (!no_tree) config.bucket_alignment = FIXED_TREE_NORM_BLOCKS;
    else if (a->deterministic_mode && t->topo.world_rank == 0)
        printf("> note: --deterministic-mode reproduces this run bitwise at data-parallel size %d only: %s\n",
               t->topo.dp_size, no_tree);
    gpt_model_create(&t->model, &config, ops, t->comm, &t->topo.tp);
    if (config.moe_shared_expert_overlap && moe_has_shared_expert(&config) && t->topo.world_rank == 0)
        printf("> %s\n", moe_shared_expert_overlap_note(&t->model.config));
    if (a->num_experts > 0) {
        t->moe_last = calloc(moe_log_length(&t->model.config), sizeof(double));
        CHECK(t->moe_last, "out of host memory for the MoE log");
    }
    data_parallel_options ddp = {a->use_distributed_optimizer, a->overlap_grad_reduce, a->overlap_param_gather};
    data_parallel_create(&t->dp, &t->model, t->comm, &t->topo, &ddp);
    /* without the distributed optimizer data-parallel replicas hold identical gradients, so
     * the norm adds over one replica's ranks; with it, over every shard of every replica */
    const comm_group *norm_group = a->use_distributed_optimizer ? &t->topo.world : &t->topo.model_parallel;
    optimizer_create(&t->opt, &t->model, &t->dp, norm_group, t->comm, a->adam_beta1, a->adam_beta2,
                     a->adam_eps, a->weight_decay, a->clip_grad);
    /* expert parallelism without the distributed optimizer: the experts' squares add over the
     * expert-model-parallel ranks (one copy of every expert), an overflow is agreed by all */
    if (t->topo.expert_groups_own && !a->use_distributed_optimizer)
        optimizer_set_expert_groups(&t->opt, t->topo.expert_model_parallel, &t->topo.world);
    t->tree = NULL;
    if (!no_tree) {
        t->tree = malloc(sizeof *t->tree);
        CHECK(t->tree, "out of host memory");
        fixed_tree_create(t->tree, &t->model, t->comm, &t->topo);
        data_parallel_use_fixed_tree(&t->dp, t->tree);
        optimizer_use_fixed_tree(&t->opt, t->tree, a->use_distributed_optimizer, &t->topo.dp, &t->topo.model_parallel);
        if (t->topo.world_rank == 0)
            printf("> --deterministic-mode: gradients, loss and gradient norm summed by one fixed tree over the "
                   "global batch (%s backend): the same bits at data-parallel sizes 1, 2, 4, ... %d\n", ops->name,
                   FIXED_TREE_NORM_BLOCKS);
    }
    /* Megatron's get_megatron_optimizer: a constant scaler for --loss-scale with fp16, bf16 or the
     * distributed optimizer; a dynamic one for --fp16 without it */
    if (a->loss_scale > 0 && (a->fp16 || a->bf16 || a->use_distributed_optimizer))
        grad_scaler_init_constant(&t->opt.scaler, a->loss_scale);
    else if (a->fp16)
        grad_scaler_init_dynamic(&t->opt.scaler, a->initial_loss_scale, a->min_loss_scale, a->loss_scale_window,
                                 a->hysteresis);
    ops->synchronize();
    double model_seconds = MPI_Wtime() - model_start;
    print_datetime(t, "after model, optimizer, and learning rate scheduler are built");
    report_setup_times(t, model_seconds, data_seconds);
    char why[512];
    if (microbatches_init(&t->batches, a->global_batch_size, a->micro_batch_size, a->data_parallel_size,
                          a->has_rampup ? a->rampup : NULL, why, sizeof why) != 0)
        user_error("--rampup-batch-size %s: %s", a->rampup_batch_size, why);
    if (a->has_rampup && t->topo.world_rank == 0)
        printf("> will use batch size rampup starting from global batch size %lld to global batch size %d with batch "
               "size increments %lld over %lld samples.\n", (long long)a->rampup[0], a->global_batch_size,
               (long long)a->rampup[1], (long long)a->rampup[2]);
    t->lr.max_lr = a->lr;
    t->lr.min_lr = a->min_lr;
    t->lr.init_lr = a->lr_warmup_init;
    /* Megatron's OptimizerParamScheduler: steps are iterations, or samples with --train-samples */
    t->lr.warmup_iters = a->train_samples ? a->lr_warmup_samples : a->lr_warmup_iters;
    t->lr.decay_iters = a->train_samples ? a->lr_decay_samples : a->lr_decay_iters;
    t->lr.style = (lr_decay_style)lr_decay_style_from_name(a->lr_decay_style);
    /* Megatron's decoupled_lr param-group override: the same schedule with its own peak and
     * floor (the floor stays --min-lr without --decoupled-min-lr) */
    t->decoupled_lr = t->lr;
    t->decoupled_lr.max_lr = a->decoupled_lr;
    if (a->decoupled_min_lr >= 0) t->decoupled_lr.min_lr = a->decoupled_min_lr;
    size_t N = (size_t)a->micro_batch_size * (size_t)(a->seq_length / t->topo.cp_size);
    t->host_tokens = malloc(sizeof(int) * N * (a->bert ? 3 : 1));
    t->host_targets = malloc(sizeof(int) * (N * (a->bert ? 2 : 1) + (a->bert ? (size_t)a->micro_batch_size : 0)));
    if (a->t5) {  /* gpt_chunk_forward's T5 packing, and one T5 sample's fields (t5_dataset.h) */
        size_t Td = (size_t)a->micro_batch_size * (size_t)a->decoder_seq_length;
        free(t->host_tokens);
        free(t->host_targets);
        t->host_tokens = malloc(sizeof(int) * (2 * N + Td));
        t->host_targets = malloc(sizeof(int) * 2 * Td);
        size_t E = (size_t)a->seq_length, D = (size_t)a->decoder_seq_length;
        t->t5_arrays = malloc(sizeof(int64_t) * (2 * E + 4 * D));
        CHECK(t->t5_arrays, "out of host memory for batches");
        int64_t *f = t->t5_arrays;
        t->t5_fields = (t5_sample){f, f + 2 * E, f + 2 * E + D, f + 2 * E + 2 * D, f + E, f + 2 * E + 3 * D, 0};
    }
    if (a->bert) {  /* one BERT sample's fields (bert_dataset.h) */
        size_t S = (size_t)a->seq_length;
        t->bert_arrays = malloc(sizeof(int64_t) * 5 * S);
        CHECK(t->bert_arrays, "out of host memory for batches");
        t->bert_fields = (bert_sample){t->bert_arrays, t->bert_arrays + S, t->bert_arrays + 2 * S,
                                       t->bert_arrays + 3 * S, t->bert_arrays + 4 * S, 0, 0};
    }
    t->sample_buffer = malloc(sizeof(int32_t) * (size_t)(a->seq_length + 1));
    CHECK(t->host_tokens && t->host_targets && t->sample_buffer, "out of host memory for batches");
    if (t->topo.world_rank == 0) train_log_open(&t->log, a->metrics_file);
    if (t->topo.world_rank == 0 && a->tensorboard_dir[0]) train_log_open_tensorboard(&t->log, a->tensorboard_dir);
    if (t->topo.world_rank == 0) train_log_set_validation(&t->log, a->log_validation_ppl_to_tensorboard, t->consumed_samples);

    /* the model's parameters, counted once: one data-parallel replica (of each expert, one
     * expert-data-parallel replica), replicated tensors on tensor-parallel rank 0, the
     * tied-embedding copy not at all */
    double parameters = 0;
    for (int i = 0; i < t->model.num_params; i++) {
        const param_tensor *p = &t->model.params[i];
        if (param_is_primary_copy(p, t->topo.tp_rank) && param_replica_rank(p, &t->model.config, t->topo.dp_cp->rank) == 0)
            parameters += (double)p->numel;
    }
    t->comm->allreduce_double_host(&parameters, 1, COMM_SUM, &t->topo.world);
    double bytes = optimizer_bytes_per_parameter(&t->opt, &t->model);
    t->comm->allreduce_double_host(&bytes, 1, COMM_MAX, &t->topo.world);
    if (t->topo.world_rank == 0) {
        int d = t->topo.dp_cp->size;  /* the distributed optimizer shards over data x context parallel */
        printf("> number of parameters: %.0f\n", parameters);
        if (t->model.mixed_precision)
            printf("> memory per parameter (%s mixed precision): %.2f bytes = params 2 + grads 4 + fp32 master "
                   "weights and Adam state %.2f (Megatron's table: 18 without the distributed optimizer, "
                   "6 + 12/d = %.2f with it, d = %d)\n", t->model.ops->act_dtype == KERNEL_FP16 ? "fp16" : "bf16",
                   bytes, bytes - 6.0, 6.0 + 12.0 / d, d);
        else
            printf("> memory per parameter (fp32): %.2f bytes = params 4 + grads 4 + Adam state %.2f "
                   "(Megatron's table: 16 without the distributed optimizer, 8 + 8/d = %.2f with it, d = %d)\n",
                   bytes, bytes - 8.0, 8.0 + 8.0 / d, d);
        fflush(stdout);
    }
    t->last_saved_iteration = -1;
    t->async_save = NULL;
    if (a->save[0]) checkpoint_check_save_dir(t, a->save);
    if (a->save[0]) checkpoint_async_setup(t);
    non_persistent_setup(t);
    if (a->load[0]) checkpoint_load_newest(t);
    if (a->exit_signal_handler) exit_signal_install();
    train_timers_setup(a, ops);
}

void trainer_teardown(trainer *t) {
    checkpoint_async_free(t);
    non_persistent_free(t);
    comm_timeout_finalize();
    papi_phases_close();
    straggler_free(&t->straggler);
    if (t->topo.world_rank == 0) train_log_close(&t->log);
    optimizer_free(&t->opt, &t->model);
    data_parallel_free(&t->dp);
    if (t->tree) fixed_tree_free(t->tree);
    free(t->tree);
    free(t->micro_batch_losses);
    gpt_model_free(&t->model);
    comm_group *groups[12];
    int num_groups = topology_groups(&t->topo, groups);
    for (int i = 0; i < num_groups; i++) t->comm->detach(groups[i]);
    topology_free(&t->topo);
    free(t->moe_last);
    free(t->host_tokens);
    free(t->host_targets);
    free(t->bert_arrays);
    free(t->t5_arrays);
    free(t->sample_buffer);
    if (t->data) gpt_datasets_close(t->data);
    free(t->data_words);
}

/* first sample of micro-batch m of this data-parallel rank, within the global batch */
static int64_t micro_batch_first_sample(const trainer *t, int m) {
    const args *a = t->args;
    return (int64_t)m * a->micro_batch_size * a->data_parallel_size +
           (int64_t)t->topo.dp_rank * a->micro_batch_size;
}

/* pretrain_bert: sample b of the micro-batch into the packed arrays of gpt_chunk_forward's encoder mode */
static void load_bert_sample(trainer *t, int64_t index, int b) {
    size_t T = (size_t)t->args->seq_length, N = (size_t)t->args->micro_batch_size * T;
    bert_sample *f = &t->bert_fields;
    bert_dataset_sample(t->data, t->split, index, f);
    for (size_t i = 0; i < T; i++) {
        size_t at = (size_t)b * T + i;
        t->host_tokens[at] = (int)f->text[i];
        t->host_tokens[N + at] = (int)f->types[i];
        t->host_tokens[2 * N + at] = (int)f->padding_mask[i];
        t->host_targets[at] = (int)f->labels[i];
        t->host_targets[N + at] = (int)f->loss_mask[i];
    }
    t->host_targets[2 * N + (size_t)b] = f->is_random;
}

/* pretrain_t5: sample b of the micro-batch into the packed arrays of gpt_chunk_forward's T5 mode:
 * tokens [B Te encoder | B Td decoder | B Te encoder padding mask], targets [B Td labels | B Td
 * loss mask] (Megatron's enc_mask: 1 on the encoder's tokens, 0 on its padding) */
static void load_t5_sample(trainer *t, int64_t index, int b) {
    const args *a = t->args;
    size_t E = (size_t)a->seq_length, D = (size_t)a->decoder_seq_length;
    size_t NE = (size_t)a->micro_batch_size * E, ND = (size_t)a->micro_batch_size * D;
    t5_sample *f = &t->t5_fields;
    t5_dataset_sample(t->data, t->split, index, f);
    for (size_t i = 0; i < E; i++) {
        t->host_tokens[(size_t)b * E + i] = (int)f->text_enc[i];
        t->host_tokens[NE + ND + (size_t)b * E + i] = f->enc_mask[i] != 0;
    }
    for (size_t i = 0; i < D; i++) {
        t->host_tokens[NE + (size_t)b * D + i] = (int)f->text_dec[i];
        t->host_targets[(size_t)b * D + i] = (int)f->labels[i];
        t->host_targets[ND + (size_t)b * D + i] = f->loss_mask[i] != 0;
    }
}

/* sample b's encoder and decoder inputs and its labels (-1: no loss) inside the padded vocabulary */
static void check_t5_sample(const trainer *t, int64_t index, int b) {
    const args *a = t->args;
    size_t E = (size_t)a->seq_length, D = (size_t)a->decoder_seq_length;
    size_t NE = (size_t)a->micro_batch_size * E;
    int V = a->padded_vocab_size;
    batch_check_ids(t->host_tokens + (size_t)b * E, E, V, 0, "the encoder input", t->split, index);
    batch_check_ids(t->host_tokens + NE + (size_t)b * D, D, V, 0, "the decoder input", t->split, index);
    batch_check_ids(t->host_targets + (size_t)b * D, D, V, 1, "the labels", t->split, index);
}

/* micro_batch_source: tokens and targets of micro-batch m of the current global batch; every id
 * checked against the padded vocabulary as it is loaded (batch_check.h) */
static void load_micro_batch(void *context, int m, const int **tokens, const int **targets,
                             micro_batch_rng *rng) {
    trainer *t = context;
    const args *a = t->args;
    /* the fixed tree: slot m of the schedule takes the local micro-batch its leaf order names */
    int64_t first = micro_batch_first_sample(t, t->tree ? fixed_tree_micro_batch_of_slot(t->tree, m) : m);
    /* context parallelism: this rank's pieces of each sequence (Megatron's
     * get_batch_on_this_cp_rank: pieces cp_rank and 2 CP - 1 - cp_rank of 2 CP), in that order */
    int T = a->seq_length, cp = t->topo.cp_size, piece = T / (2 * cp), local_T = T / cp, V = a->padded_vocab_size;
    int piece_start[2] = {t->topo.cp_rank * piece, (2 * cp - 1 - t->topo.cp_rank) * piece};
    if (t->loaded_micro_batch != m) {
        run_phase left = papi_phases_enter(t->training ? PHASE_DATA : PHASE_OTHER);
        for (int b = 0; b < a->micro_batch_size; b++) {
            int64_t index = t->batch_start + first + b;
            if (t->task) {
                t->task->load_row(t->task->context, t->split, index, b, t->host_tokens, t->host_targets);
                batch_check_ids(t->host_tokens + (size_t)b * T, (size_t)T, V, 0, "the token ids", t->split, index);
                continue;
            }
            if (a->bert) {
                load_bert_sample(t, index, b);
                batch_check_ids(t->host_tokens + (size_t)b * T, (size_t)T, V, 0, "the text", t->split, index);
                continue;
            }
            if (a->t5) {
                load_t5_sample(t, index, b);
                check_t5_sample(t, index, b);
                continue;
            }
            if (t->data) gpt_dataset_sample(t->data, t->split, index, t->sample_buffer);
            else mock_data_sample(a->seed, t->split, index, a->vocab_size, T + 1, t->sample_buffer);
            for (int i = 0; i < local_T; i++) {
                int position = cp > 1 ? piece_start[i / piece] + i % piece : i;
                t->host_tokens[(size_t)b * local_T + i] = t->sample_buffer[position];
                t->host_targets[(size_t)b * local_T + i] = t->sample_buffer[position + 1];
            }
            batch_check_ids(t->host_tokens + (size_t)b * local_T, (size_t)local_T, V, 0, "the tokens", t->split, index);
            batch_check_ids(t->host_targets + (size_t)b * local_T, (size_t)local_T, V, 0, "the labels", t->split, index);
        }
        t->loaded_micro_batch = m;
        papi_phases_enter(left);
    }
    *tokens = t->host_tokens;
    *targets = t->host_targets;
    rng->iteration = t->rng_iteration;
    rng->first_sample = first;
    rng->training = t->training;
}

/* the MoE layers' log of the last iteration over every rank: summed over the world (pipeline
 * stages hold different layers, data-parallel ranks different tokens, tensor-parallel ranks the
 * same values), then the losses averaged over micro-batches and data-parallel ranks (Megatron's
 * track_moe_metrics) and the token counts taken once per tensor-parallel group */
static void moe_log_collect(trainer *t, moe_log_stats *out) {
    const args *a = t->args;
    const gpt_config *c = &t->model.config;
    int L = a->num_layers, E = a->num_experts;
    size_t n = moe_log_length(c);
    MPI_Request request;
    CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, t->moe_last, (int)n, MPI_DOUBLE, MPI_SUM, t->topo.world.mpi, &request));
    comm_timed_wait(&request, "all-reduce (MoE log)", t->topo.world.name, t->topo.world.mpi);
    double ranks_per_layer = (double)a->tensor_model_parallel_size * a->data_parallel_size;
    double loss_scale = 1.0 / (ranks_per_layer * (t->moe_last_micro_batches > 0 ? t->moe_last_micro_batches : 1));
    int moe_layers = 0;
    memset(out, 0, sizeof *out);
    for (int l = 0; l < L; l++) {
        t->moe_last[l] *= loss_scale;
        t->moe_last[L + l] *= loss_scale;
        for (int e = 0; e < E; e++) t->moe_last[2 * L + l * E + e] /= a->tensor_model_parallel_size;
        if (!c->moe_layer[l]) continue;
        moe_layers++;
        out->load_balancing_loss += t->moe_last[l];
        out->z_loss_value += t->moe_last[L + l];
    }
    out->load_balancing_loss /= moe_layers;
    out->z_loss_value /= moe_layers;
    out->num_layers = L;
    out->num_experts = E;
    out->aux_loss = a->moe_aux_loss_coeff > 0 && strcmp(a->moe_router_load_balancing_type, "none") != 0;
    out->z_loss = a->moe_z_loss_coeff > 0;
    out->per_layer = a->moe_per_layer_logging;
    out->moe_layer = c->moe_layer;
    out->values = t->moe_last;
}

/* forward (and backward when training) over one global batch; returns the mean per-token loss
 * over the whole global batch (computed on the last stage, shared with every rank) */
static double run_global_batch(trainer *t, int split, int64_t batch_start, uint64_t rng_iteration,
                               int training, int num_micro_batches) {
    const args *a = t->args;
    double tokens_in_batch = (double)num_micro_batches * a->micro_batch_size * a->data_parallel_size * (double)a->seq_length;
    /* pretrain_bert: each micro-batch's loss is already a mean (over its masked positions and
     * samples); Megatron averages them over micro-batches and data-parallel ranks */
    if (a->bert || a->t5) tokens_in_batch = (double)num_micro_batches * a->data_parallel_size;
    t->model.bert_lm_loss = t->model.bert_sop_loss = t->model.bert_task_correct = 0.0;
    t->model.t5_loss_sum = t->model.t5_loss_tokens = 0.0;
    t->split = split;
    t->batch_start = batch_start;
    t->rng_iteration = rng_iteration;
    t->training = training;
    t->loaded_micro_batch = -1;
    micro_batch_source source = {t, load_micro_batch};
    /* the backward's seed: d(mean loss)/d(loss_i), times the loss scale (fp32, as Megatron's scaled loss) */
    float grad_scale = (float)(1.0 / tokens_in_batch) * (training ? grad_scaler_scale(&t->opt.scaler) : 1.0f);
    if (t->tree) {
        fixed_tree_begin(t->tree, num_micro_batches);
        t->micro_batch_losses = realloc(t->micro_batch_losses, sizeof(double) * (size_t)num_micro_batches);
        CHECK(t->micro_batch_losses, "out of host memory");
    }
    double loss_sum = pipeline_run(&t->model, training ? &t->dp : NULL, t->comm, &t->topo, num_micro_batches,
                                   !training, &source, grad_scale, t->tree ? t->micro_batch_losses : NULL);
    /* the last stage's tensor-parallel ranks all hold the same losses: count one of them */
    int counted = t->topo.pp_rank == t->topo.pp_size - 1 && t->topo.tp_rank == 0;
    t->local_loss_sum = counted ? loss_sum : 0.0;
    /* the fixed tree's sum over the data-parallel ranks, counted once (on data-parallel rank 0) */
    if (t->tree) loss_sum = fixed_tree_loss_sum(t->tree, t->micro_batch_losses, &t->topo.dp);
    if (!counted || (t->tree && t->topo.dp_rank != 0)) loss_sum = 0.0;
    t->comm->allreduce_double_host(&loss_sum, 1, COMM_SUM, &t->topo.world);
    if (a->bert) {  /* the lm and sop losses apart, for the log */
        double parts[3] = {counted ? t->model.bert_lm_loss : 0.0, counted ? t->model.bert_sop_loss : 0.0,
                           counted ? t->model.bert_task_correct : 0.0};
        t->comm->allreduce_double_host(parts, 3, COMM_SUM, &t->topo.world);
        t->last_lm_loss = parts[0] / tokens_in_batch;
        t->last_sop_loss = parts[1] / tokens_in_batch;
        t->last_task_correct = parts[2];
    }
    if (a->t5) {  /* Megatron's "lm loss": the global batch's masked loss sum over its loss-mask tokens */
        double parts[2] = {counted ? t->model.t5_loss_sum : 0.0, counted ? t->model.t5_loss_tokens : 0.0};
        t->comm->allreduce_double_host(parts, 2, COMM_SUM, &t->topo.world);
        return parts[1] > 0 ? parts[0] / parts[1] : 0.0;
    }
    return loss_sum / tokens_in_batch;
}

/* Megatron's evaluate(): --eval-iters global batches from an evaluation iterator: the one
 * validation iterator, which goes on where the previous evaluation stopped
 * (consumed_valid_samples, kept in checkpoints), or the test iterator (from its start, once) */
static double evaluate_split(trainer *t, int split, int64_t *consumed) {
    const args *a = t->args;
    static const char *const names[GPT_DATA_SPLITS] = {"train", "validation", "test"};
    data_parallel_finish_param_gather(&t->dp);
    double total = 0.0, sop_total = 0.0;
    for (int64_t k = 0; k < a->eval_iters; k++) {
        if (t->data && *consumed + a->global_batch_size > gpt_dataset_num_samples(t->data, split))
            user_error("the %s split is exhausted: %lld samples, %lld consumed, %d more needed (an unweighted "
                       "blend holds one epoch of each corpus)", names[split], (long long)gpt_dataset_num_samples(t->data, split),
                       (long long)*consumed, a->global_batch_size);
        /* evaluation always takes whole global batches (Megatron's eval_global_batch_size) */
        double loss = run_global_batch(t, split, *consumed, 0, 0, a->num_micro_batches);
        total += a->bert ? t->last_lm_loss : loss;  /* pretrain_bert: the lm loss, as Megatron's "lm loss value" */
        sop_total += t->last_sop_loss;
        *consumed += a->global_batch_size;
    }
    t->evaluation_sop_loss = a->bert && !a->bert_no_binary_head ? sop_total / (double)a->eval_iters : NAN;
    return total / (double)a->eval_iters;
}

double trainer_forward_batch(trainer *t, int split, int64_t batch_start) {
    data_parallel_finish_param_gather(&t->dp);
    return run_global_batch(t, split, batch_start, 0, 0, t->args->num_micro_batches);
}

static double evaluate(trainer *t) { return evaluate_split(t, SPLIT_VALID, &t->consumed_valid_samples); }

/* Megatron's do_test: --eval-iters > 0 and a test dataset */
static int do_test(const trainer *t) {
    return t->args->eval_iters > 0 && (!t->data || gpt_dataset_num_samples(t->data, SPLIT_TEST) > 0);
}

/* Megatron's do_valid: --eval-iters > 0 and a validation dataset (--split may give it none) */
static int do_valid(const trainer *t) {
    return t->args->eval_iters > 0 && (!t->data || gpt_dataset_num_samples(t->data, SPLIT_VALID) > 0);
}

/* what activation recomputation runs again, for HFU: selective with core_attn the attention core
 * of every layer (the recomputed norms are no matrix products); full uniform every layer's
 * forward; full block the first --recompute-num-layers layers of each model chunk (pipeline
 * stage, or virtual stage) */
static recompute_spec recompute_spec_of(const args *a) {
    recompute_spec r = {RECOMPUTE_NONE, 0};
    if (args_recompute_module(a, "core_attn")) r.granularity = RECOMPUTE_SELECTIVE;
    if (strcmp(a->recompute_granularity, "full") != 0) return r;
    r.granularity = RECOMPUTE_FULL;
    r.num_layers = a->num_layers;
    if (!strcmp(a->recompute_method, "block")) {
        int chunks = a->pipeline_model_parallel_size * a->virtual_pipeline_model_parallel_size;
        int per_chunk = a->num_layers / chunks;
        r.num_layers = chunks * (a->recompute_num_layers < per_chunk ? a->recompute_num_layers : per_chunk);
    }
    return r;
}

/* the model's FLOPs per iteration (perf/metrics/flops.h); hardware FLOPs add the forward work
 * that activation recomputation repeats. pretrain_gpt: Megatron's count (causal attention);
 * pretrain_bert and finetune_bert: the encoder with bidirectional attention and BERT's heads;
 * pretrain_t5: the encoder over --encoder-seq-length, the decoder (self- and cross-attention)
 * over --decoder-seq-length and the logits on the decoder. global_batch_size counts samples
 * (finetune_bert: rows, a RACE sample is a row per choice). */
static iteration_flops iteration_flops_of(const args *a, int64_t global_batch_size) {
    int moe_layers = 0;  /* MoE layers count only the experts a token visits (Megatron's formula) */
    for (int l = 0; a->num_experts > 0 && l < a->num_layers; l++) moe_layers += a->moe_layer[l];
    model_shape shape = {
        .num_layers = a->num_layers,
        .hidden_size = a->hidden_size,
        .num_attention_heads = a->num_attention_heads,
        .num_query_groups = a->num_query_groups,
        .swiglu = a->swiglu,
        .kv_channels = a->kv_channels,
        .ffn_hidden_size = a->ffn_hidden_size,
        .num_experts = a->num_experts,
        .moe_layers = moe_layers,
        .moe_router_topk = a->moe_router_topk,
        .moe_ffn_hidden_size = a->moe_ffn_hidden_size,
        .moe_shared_expert_intermediate_size = a->num_experts > 0 ? a->moe_shared_expert_intermediate_size : 0,
        .padded_vocab_size = a->padded_vocab_size,
        .seq_length = a->seq_length,
        .causal = 1,
    };
    recompute_spec recompute = recompute_spec_of(a);
    if (a->bert) {
        /* pretrain_bert: the LM head, and the pooler and binary head unless --bert-no-binary-head;
         * finetune_bert: the pooler and the task head (MNLI 3 classes, RACE 1 logit per choice) */
        int task_outputs = !strcmp(a->task, "RACE") ? 1 : 3;
        bert_heads_shape heads = {.lm_head = !a->bert_task,
                                  .pooled_outputs = a->bert_task ? task_outputs : a->bert_no_binary_head ? 0 : 2};
        return bert_flops_per_iteration(&shape, &heads, (double)global_batch_size, &recompute);
    }
    if (a->t5) {  /* args: num_layers and seq_length are the encoder's */
        encoder_decoder_shape t5 = {shape, a->decoder_num_layers, a->decoder_seq_length};
        /* full: per stack (each a TransformerBlock), uniform all its layers, block the first
         * --recompute-num-layers of each (t5_flops_per_iteration caps them at the stack's) */
        if (recompute.granularity == RECOMPUTE_FULL)
            recompute.num_layers = strcmp(a->recompute_method, "block") != 0
                                       ? (a->num_layers > a->decoder_num_layers ? a->num_layers : a->decoder_num_layers)
                                       : a->recompute_num_layers;
        return t5_flops_per_iteration(&t5, (double)global_batch_size, &recompute);
    }
    return flops_per_iteration(&shape, (double)global_batch_size, &recompute);
}

/* --profile-ranks lists this global rank */
static int profile_this_rank(const char *ranks, int rank) {
    for (const char *r = ranks; *r;) {
        char *end;
        if (strtol(r, &end, 10) == rank) return 1;
        if (end == r) return 0;
        r = *end ? end + 1 : end;
    }
    return 0;
}

/* after an iteration: --save-interval, the exit signal, --exit-interval (Megatron's order);
 * returns 1 when training must stop here */
static int checkpoint_or_exit(trainer *t) {
    const args *a = t->args;
    int is_logger = t->topo.world_rank == 0;
    checkpoint_async_poll(t); /* --async-save: log a save that finished in the background */
    if (a->save[0] && a->save_interval > 0 && t->iteration % a->save_interval == 0)
        checkpoint_save(t, a->save);
    else if (a->save[0] && a->non_persistent_save_interval > 0 && t->iteration % a->non_persistent_save_interval == 0)
        non_persistent_save(t);
    if (a->exit_signal_handler) {
        double signal_number = exit_signal_received();
        t->comm->allreduce_double_host(&signal_number, 1, COMM_MAX, &t->topo.world);
        if (signal_number) {
            if (t->iteration != t->last_saved_iteration) checkpoint_save(t, a->save);
            checkpoint_async_finish(t); /* the exit waits for the save in flight */
            if (is_logger) printf("exiting program after receiving signal %d at iteration %lld\n", (int)signal_number, (long long)t->iteration);
            t->exited_early = 1;
            return 1;
        }
    }
    if (a->exit_duration_in_mins > 0) {
        /* Megatron's: every rank measures, the decision is the MAX over ranks */
        double minutes = (wall_clock_now() - t->job_start) / 60.0;
        double done = minutes > a->exit_duration_in_mins;
        t->comm->allreduce_double_host(&done, 1, COMM_MAX, &t->topo.world);
        if (done) {
            if (a->save[0] && t->iteration != t->last_saved_iteration) checkpoint_save(t, a->save);
            checkpoint_async_finish(t); /* the exit waits for the save in flight */
            if (is_logger)
                printf("exiting program after %.4f minutes (--exit-duration-in-mins %g) at iteration %lld\n", minutes,
                       a->exit_duration_in_mins, (long long)t->iteration);
            t->exited_early = 1;
            return 1;
        }
    }
    if (a->exit_interval > 0 && t->iteration % a->exit_interval == 0 && t->iteration < a->train_iters) {
        if (a->save[0] && t->iteration != t->last_saved_iteration) checkpoint_save(t, a->save);
        checkpoint_async_finish(t); /* the exit waits for the save in flight */
        if (is_logger) printf("exiting program at iteration %lld\n", (long long)t->iteration);
        t->exited_early = 1;
        return 1;
    }
    return 0;
}

double trainer_train(trainer *t) {
    const args *a = t->args;
    gpt_model *model = &t->model;
    int is_logger = t->topo.world_rank == 0;
    double interval_loss = 0.0, interval_time = 0.0;
    double interval_lm_loss = 0.0, interval_sop_loss = 0.0;  /* pretrain_bert's two losses */
    int64_t interval_iterations = 0, interval_advanced = 0;
    double last_validation = NAN;
    spiky_loss_history spiky;
    memset(&spiky, 0, sizeof spiky);
    t->last_heartbeat = MPI_Wtime();

    int profiling = a->profile && profile_this_rank(a->profile_ranks, t->topo.world_rank) && model->ops->profiler_range;
    /* the ramp-up continues from the consumed samples (a resumed run too) */
    char why[512];
    microbatches_update(&t->batches, t->consumed_samples, 0, why, sizeof why);
    int64_t num_micro_batches = t->batches.num_micro_batches;
    /* test hook: MTC_FAULT_ITERATION_PAUSE_MS=N sleeps N ms before every iteration, so that a
     * fault-injection test's kill lands while the job still runs (tests/mpi/fault_injection_test.sh) */
    const char *iteration_pause = getenv("MTC_FAULT_ITERATION_PAUSE_MS");
    long pause_ms = iteration_pause ? atol(iteration_pause) : 0;
    int64_t first_iteration = t->iteration;
    print_datetime(t, "before the start of training step");
    t->startup.training_start = since_start(t);
    while (t->iteration < a->train_iters) {
        papi_sample(t);
        if (pause_ms > 0) nanosleep(&(struct timespec){pause_ms / 1000, pause_ms % 1000 * 1000000L}, NULL);
        if (profiling && t->iteration == a->profile_step_start) model->ops->profiler_range(1);
        /* Megatron's train loop: update without the check, save a checkpoint when the number of
         * micro-batches changed (and --save is given), then update with the consistency check */
        microbatches_update(&t->batches, t->consumed_samples, 0, why, sizeof why);
        if (t->batches.num_micro_batches != num_micro_batches && t->iteration != 0) {
            if (is_logger)
                printf("> ramping up batch size from %lld to %lld\n",
                       (long long)(num_micro_batches * a->micro_batch_size * a->data_parallel_size),
                       (long long)t->batches.current_global_batch_size);
            CHECK(t->batches.num_micro_batches > num_micro_batches,
                  "Number of microbatches should be increasing due to batch size rampup; instead going from %lld to %lld",
                  (long long)num_micro_batches, (long long)t->batches.num_micro_batches);
            if (a->save[0] && t->iteration != t->last_saved_iteration) checkpoint_save(t, a->save);
        }
        num_micro_batches = t->batches.num_micro_batches;
        if (microbatches_update(&t->batches, t->consumed_samples, 1, why, sizeof why) != 0)
            user_error("--rampup-batch-size %s at %lld consumed samples: %s", a->rampup_batch_size,
                       (long long)t->consumed_samples, why);
        if (a->virtual_pipeline_model_parallel_size > 1 && num_micro_batches % a->pipeline_model_parallel_size != 0)
            user_error("--rampup-batch-size %s: the global batch %lld makes %lld micro-batches, not a multiple of "
                       "--pipeline-model-parallel-size %d (the interleaved schedule needs one)", a->rampup_batch_size,
                       (long long)t->batches.current_global_batch_size, (long long)num_micro_batches,
                       a->pipeline_model_parallel_size);
        int64_t batch = num_micro_batches * a->micro_batch_size * a->data_parallel_size;
        double start = MPI_Wtime();
        /* the schedule's position: iterations (samples) less those an overflow skipped */
        int64_t schedule_steps = (a->train_samples ? t->consumed_samples : t->iteration) - t->lr_skipped_steps;
        double lr = lr_at(&t->lr, schedule_steps);
        /* the gradients clear beside the forward (the weight matrices' first writes overwrite them
         * instead); the model joins before its first gradient write */
        gpt_model_start_grads(model);
        data_parallel_start_iteration(&t->dp);
        timers_start("forward-backward", 1);
        straggler_start(&t->straggler, STRAGGLER_STEP);
        straggler_start(&t->straggler, STRAGGLER_FORWARD_BACKWARD);
        straggler_fault_slow_rank(t->topo.world_rank);
        double loss = run_global_batch(t, SPLIT_TRAIN, t->consumed_samples, (uint64_t)t->iteration + 1, 1,
                                       (int)num_micro_batches);
        straggler_stop(&t->straggler, STRAGGLER_FORWARD_BACKWARD);
        papi_phases_enter(PHASE_GRAD_REDUCE);
        data_parallel_finish_grad_sync(&t->dp);
        /* Megatron's finalize_model_grads: the routers' expert biases move with the global
         * batch's tokens per expert (also when an overflow skips the step) */
        moe_expert_bias_update(model, &t->topo.dp);
        /* fp8 delayed scaling: the step's amaxes reduced over tensor x data x context parallel
         * ranks (Megatron's amax reduction group; the experts' over the ranks holding them: with
         * an expert tensor-parallel size other than tp, its group x the expert-data-parallel
         * one), the scales updated (fp8_linear.h) */
        fp8_step_end(model, t->topo.dp_cp, t->topo.expert_tp_dp);
        if (t->moe_last) {
            moe_log_take(model, t->moe_last);
            t->moe_last_micro_batches = (int)num_micro_batches;
        }
        fault_inject_grad_overflow(t, model, t->iteration + 1);
        timers_stop("forward-backward");
        nan_check_loss(t, t->iteration + 1, loss, t->local_loss_sum);
        spiky_loss_check(&spiky, t, t->iteration + 1, loss);
        papi_phases_enter(PHASE_OPTIMIZER);
        timers_start("optimizer", 1);
        straggler_start(&t->straggler, STRAGGLER_OPTIMIZER);
        /* with a loss scaler: unscale, agree on found_inf, update the scale; an overflow skips
         * the step (Megatron's MixedPrecisionOptimizer.step: no grad norm then) */
        int found_inf = optimizer_prepare_grads(&t->opt, model);
        double grad_norm = NAN;
        if (!found_inf || a->check_for_nan_in_loss_and_grad) grad_norm = optimizer_grad_norm(&t->opt, model);
        nan_check_grad_norm(t, t->iteration + 1, grad_norm);
        /* Megatron's count_zeros_fp32: the unscaled gradient before clipping; none when skipped */
        double num_zeros = a->log_num_zeros_in_grad && !found_inf ? optimizer_grad_zeros(&t->opt, model) : NAN;
        double embedding_lr = t->decoupled_lr.max_lr < 0 ? lr : lr_at(&t->decoupled_lr, schedule_steps);
        int skipped = found_inf || optimizer_step_decoupled(&t->opt, model, grad_norm, lr, embedding_lr);
        /* Megatron steps the schedule only when the update succeeded (an overflow skipped none) */
        if (found_inf) t->lr_skipped_steps += a->train_samples ? batch : 1;
        if (skipped) {
            /* Megatron's training_log: a skipped iteration's loss is left out of the average and
             * counts as a nan iteration when it is not finite */
            t->skipped_iterations++;
            if (!isfinite(loss)) t->nan_iterations++;
        } else {
            interval_loss += loss;
            interval_lm_loss += t->last_lm_loss;
            interval_sop_loss += t->last_sop_loss;
            interval_advanced++;
        }
        if (t->iteration == 0) {
            /* how much of the gradient reduction overlapped the backward (rank 0's buckets) */
            if (is_logger)
                printf("> gradient buckets: %d, reductions started during the backward: %d\n",
                       model->num_buckets, t->dp.buckets_started);
            if (is_logger) {
                size_t cleared = 0;
                for (int r = 0; r < model->num_clear_ranges; r++) cleared += model->clear_ranges[2 * r + 1];
                printf("> gradients: %d weight matrices written over by their first gradient, %zu of %zu elements "
                       "cleared per step\n", model->num_first_write, cleared, model->num_elements);
            }
        }
        /* after the update, before the all-gather writes into the parameters (calc_params_l2_norm) */
        double params_norm = a->log_params_norm ? optimizer_params_norm(&t->opt, model) : NAN;
        data_parallel_start_param_gather(&t->dp);
        timers_stop("optimizer");
        model->ops->synchronize();
        straggler_stop(&t->straggler, STRAGGLER_OPTIMIZER);
        straggler_stop(&t->straggler, STRAGGLER_STEP);
        papi_phases_enter(PHASE_OTHER);
        t->iteration++;
        if (t->iteration == first_iteration + 1) {
            t->startup.first_iteration = since_start(t);
            if (is_logger) train_log_startup(&t->log, &t->startup);
        }
        if (profiling && t->iteration == a->profile_step_end) model->ops->profiler_range(0);
        t->consumed_samples += batch;
        interval_time += MPI_Wtime() - start;
        interval_iterations++;
        if (is_logger && t->iteration % a->tensorboard_log_interval == 0) {
            tensorboard_step scalars = {
                .iteration = t->iteration,
                .consumed_samples = t->consumed_samples,
                .learning_rate = a->no_log_learning_rate_to_tensorboard ? NAN : lr,
                .global_batch_size = (int)batch,
                .lm_loss = a->bert ? t->last_lm_loss : loss,
                .sop_loss = a->bert && !a->bert_no_binary_head && !a->bert_task ? t->last_sop_loss : NAN,
                .loss_scale = a->no_log_loss_scale_to_tensorboard ? NAN : grad_scaler_scale(&t->opt.scaler),
                .world_size = a->log_world_size_to_tensorboard ? (double)a->world_size : NAN,
                .grad_norm = found_inf ? NAN : grad_norm,
                .num_zeros = num_zeros,
                .params_norm = params_norm,
                .memory = a->log_memory_to_tensorboard,
            };
            train_log_tensorboard_step(&t->log, &scalars);
        }
        if (is_logger) train_log_set_validation(&t->log, a->log_validation_ppl_to_tensorboard, t->consumed_samples);

        if (t->iteration % a->log_interval == 0 || t->iteration == a->train_iters) {
            double seconds = interval_time / (double)interval_iterations;
            iteration_flops flops = iteration_flops_of(a, batch);
            double flops_to_tflops_per_gpu = 1.0 / (seconds * a->world_size * 1e12);
            fault_stop_at_log(t->topo.world_rank, t->iteration);
            phase_counts papi;
            if (t->papi_totals.num_events) papi_collect(t, &papi);
            /* the largest peak of backend memory over ranks (every rank logs at the same iterations) */
            unsigned long long peak_memory = kernels_memory_peak();
            MPI_Request request;
            CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, &peak_memory, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, t->topo.world.mpi,
                                     &request));
            comm_timed_wait(&request, "all-reduce (peak memory)", t->topo.world.name, t->topo.world.mpi);
            timers_table timers;
            train_timers_collect(&timers, a);
            moe_log_stats moe;
            if (t->moe_last) moe_log_collect(t, &moe);
            straggler_report(&t->straggler, (double)interval_iterations, flops.model);
            iteration_stats s = {
                .iteration = t->iteration,
                .train_iters = a->train_iters,
                .consumed_samples = t->consumed_samples,
                .elapsed_ms_per_iteration = 1000.0 * seconds,
                .tokens_per_second = (double)batch * a->seq_length / seconds,
                .tflops_per_gpu = flops.model * flops_to_tflops_per_gpu,
                .hardware_tflops_per_gpu = flops.hardware * flops_to_tflops_per_gpu,
                .peak_tflops = a->peak_tflops,
                .learning_rate = lr,
                .global_batch_size = (int)batch,
                .lm_loss = (a->bert ? interval_lm_loss : interval_loss) / (double)(interval_advanced > 0 ? interval_advanced : 1),
                .sop_loss = interval_sop_loss / (double)(interval_advanced > 0 ? interval_advanced : 1),
                .has_sop_loss = a->bert && !a->bert_no_binary_head && !a->bert_task,
                .loss_scale = grad_scaler_scale(&t->opt.scaler),
                .grad_norm = grad_norm,
                .has_grad_norm = !found_inf,
                .num_zeros = num_zeros,
                .has_num_zeros = !isnan(num_zeros),
                .params_norm = params_norm,
                .has_params_norm = !isnan(params_norm),
                .tensorboard_throughput = a->log_throughput && a->log_timers_to_tensorboard,
                .skipped_iterations = t->skipped_iterations,
                .nan_iterations = t->nan_iterations,
                .papi = t->papi_totals.num_events ? &papi : NULL,
                .peak_memory_bytes = (double)peak_memory,
                .timers = &timers,
                .timer_iterations = (double)interval_iterations,
                .timers_per_rank = !strcmp(a->timing_log_option, "all"),
                .moe = t->moe_last ? &moe : NULL,
                .stragglers_json = t->straggler.json,
            };
            if (is_logger) train_log_iteration(&t->log, &s);
            if (is_logger) train_timers_log(&t->log, &timers, a, t->iteration, (double)interval_iterations, seconds);
            timers_table_free(&timers);
            interval_loss = interval_time = interval_lm_loss = interval_sop_loss = 0.0;
            interval_iterations = interval_advanced = 0;
            t->skipped_iterations = t->nan_iterations = 0;
            t->last_heartbeat = MPI_Wtime();
        } else if (is_logger && a->heartbeat_interval > 0 && MPI_Wtime() - t->last_heartbeat >= a->heartbeat_interval) {
            /* a long --log-interval: a line now and then shows the job is alive */
            time_t now = time(NULL);
            char stamp[32];
            strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", localtime(&now));
            printf("[%s] heartbeat: iteration %lld/%lld, consumed samples %lld\n", stamp, (long long)t->iteration,
                   (long long)a->train_iters, (long long)t->consumed_samples);
            fflush(stdout);
            t->last_heartbeat = MPI_Wtime();
        }
        if (t->task && t->task->after_iteration) t->task->after_iteration(t->task->context, t);
        /* evaluation, then checkpoint and exit (Megatron's order: a checkpoint counts this
         * evaluation's validation samples as consumed) */
        if (do_valid(t) && t->iteration % a->eval_interval == 0) {
            last_validation = evaluate(t);
            char when[64];
            snprintf(when, sizeof when, "at iteration %lld", (long long)t->iteration);
            if (is_logger) train_log_validation(&t->log, t->iteration, when, last_validation, t->evaluation_sop_loss);
        }
        papi_phases_enter(PHASE_CHECKPOINT);
        int stop = checkpoint_or_exit(t);
        papi_phases_enter(PHASE_OTHER);
        if (stop) break;
    }
    data_parallel_finish_param_gather(&t->dp);
    print_datetime(t, "after training is done");
    papi_phases_pause(0); /* the final save is counted */
    papi_phases_enter(PHASE_CHECKPOINT);
    if (a->save[0] && t->iteration != t->last_saved_iteration) checkpoint_save(t, a->save);
    checkpoint_async_finish(t); /* the job's end waits for the save in flight */
    papi_phases_enter(PHASE_OTHER);
    if (t->papi_totals.num_events) {
        phase_counts rest;
        papi_collect(t, &rest);
        if (is_logger) train_log_papi_table(&t->papi_totals);
    }
    /* pretrain() after train(): the validation set, then the test set (a fresh iterator) */
    char when[96];
    if (do_valid(t) && !t->exited_early) {
        last_validation = evaluate(t);
        snprintf(when, sizeof when, "at iteration %lld on validation set", (long long)t->iteration);
        if (is_logger) train_log_evaluation(&t->log, "validation", t->iteration, when, last_validation, t->evaluation_sop_loss);
    }
    if (do_test(t) && !t->exited_early) {
        int64_t consumed_test_samples = 0;
        double test_loss = evaluate_split(t, SPLIT_TEST, &consumed_test_samples);
        snprintf(when, sizeof when, "at iteration %lld on test set", (long long)t->iteration);
        if (is_logger) train_log_evaluation(&t->log, "test", t->iteration, when, test_loss, t->evaluation_sop_loss);
    }
    if (a->dump_parameters[0]) param_dump_write(&t->model, &t->topo, a->dump_parameters);
    return last_validation;
}

/* memory_estimate.c: see memory_estimate.h. */
#include "app/training/memory_estimate.h"
#include "app/core/error.h"
#include "app/training/pipeline_schedule.h"
#include "app/optim/fixed_tree_reduce.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

enum { workspace_bytes = 256 << 20 };  /* staging buffers, kernels' scratch, MPI: a flat allowance */

/* the 16-bit activation bytes of a stack of layers (vp model chunks of per_chunk layers each)
 * of act16 bytes per layer and micro-batch, in16 its input: every layer kept per slot, or with
 * full recompute each checkpointed group's input per slot and one group's activations for the
 * backward (uniform: groups of N; block: the first N layers one by one, the rest kept); *kept:
 * the layers kept whole */
static double stack_activations(const args *a, double slots, double vp, double per_chunk, double act16, double in16,
                                double *kept) {
    double inputs = 0, group = 0;
    *kept = vp * per_chunk;
    if (!strcmp(a->recompute_granularity, "full")) {
        double n = a->recompute_num_layers < per_chunk ? a->recompute_num_layers : per_chunk;
        int uniform = strcmp(a->recompute_method, "block") != 0;
        double groups = uniform ? ceil(per_chunk / n) : n;
        *kept = vp * (per_chunk - (uniform ? per_chunk : n));
        inputs = vp * groups * in16;
        group = uniform ? n : 1;
    }
    return slots * (*kept * act16 + inputs) + group * act16;
}

memory_estimate memory_estimate_compute(const args *a, const topology *topo, const kernel_ops *ops) {
    memory_estimate m = {0};
    /* s: the tokens of a sequence this rank holds (1/cp of them with context parallelism) */
    double h = a->hidden_size, s = a->seq_length / (topo->cp_size > 0 ? topo->cp_size : 1), b = a->micro_batch_size, heads = a->num_attention_heads;
    double kv = a->kv_channels > 0 ? a->kv_channels : h / heads;
    double ffn = a->ffn_hidden_size > 0 ? a->ffn_hidden_size : 4 * h;
    double vocab = a->padded_vocab_size > 0 ? a->padded_vocab_size : a->vocab_size;
    double positions = a->max_position_embeddings > 0 ? a->max_position_embeddings : s;
    double tp = topo->tp_size, pp = topo->pp_size, dp = topo->dp_size * (topo->cp_size > 0 ? topo->cp_size : 1);
    /* one layer: qkv, projection, fc1, fc2 with biases, two layer norms */
    double layer = 3 * heads * kv * (h + 1) + heads * kv * h + h + ffn * (h + 1) + ffn * h + h + 4 * h;
    double layers_here = (double)((a->num_layers + topo->pp_size - 1) / topo->pp_size);
    /* MoE layers: the router [E, h] and this rank's E/ep experts (fc1 of 1 or 2 Fm rows, fc2) in
     * place of the dense MLP (split over the expert tensor-parallel ranks), and the shared experts (fc1 of 1 or 2 Fs rows, fc2; the gate [1, h]
     * whole on every rank); the share of MoE layers is the pattern's */
    double moe_share = 0, moe_layer = 0, k = a->moe_router_topk, ep = topo->ep_size > 0 ? topo->ep_size : 1;
    double fm = a->moe_ffn_hidden_size, fc1m = (a->swiglu ? 2 : 1) * fm;
    double fs = a->num_experts > 0 ? a->moe_shared_expert_intermediate_size : 0, fc1s = (a->swiglu ? 2 : 1) * fs;
    if (a->num_experts > 0) {
        for (int l = 0; l < a->num_layers; l++) moe_share += a->moe_layer[l];
        moe_share /= a->num_layers;
        moe_layer = layer - (ffn * (h + 1) + ffn * h) + a->num_experts * h * tp +
                    a->num_experts / ep * (fc1m * h + fm * h) * tp / (topo->etp_size > 0 ? topo->etp_size : tp) +
                    (fc1s * h + fs * h) +
                    (fs > 0 && a->moe_shared_expert_gate ? h * tp : 0);
    }
    double params = layers_here * ((1 - moe_share) * layer + moe_share * moe_layer) / tp + vocab * h / tp +
                    positions * h + 2 * h;
    if (a->untie_embeddings_and_output_weights && pp == 1) params += vocab * h / tp;
    /* T5: the decoder's layers, each with a cross-attention (queries, keys and values, output,
     * its norm) besides a GPT layer's, and the decoder's final norm */
    if (a->t5)
        params += a->decoder_num_layers * (layer + 3 * heads * kv * (h + 1) + heads * kv * h + h + 2 * h) / tp + 2 * h;
    int mixed = ops->act_bytes == 2;
    double per_param = mixed ? (a->use_distributed_optimizer ? 6 + 12 / dp : 18)
                             : (a->use_distributed_optimizer ? 8 + 8 / dp : 16);
    double weights_and_grads = mixed ? 6 : 8;
    m.parameters = params * weights_and_grads;
    m.optimizer = params * (per_param - weights_and_grads);
    /* one layer, 16-bit activations (Korthikanti et al.'s 34sbh) and what the backend's attention
     * keeps for its backward (its workspace: the T x T probabilities on the CPU, the softmax
     * statistics of flash attention on CUDA; Korthikanti's 5as^2b). Selective recompute keeps
     * no workspace per layer (one is shared). */
    int selective = args_recompute_module(a, "core_attn");
    /* 4sbh for the two norms: none with --recompute-modules layernorm (their outputs are made
     * again) or --memory-efficient-layer-norm (their inputs, the residual stream, are not kept) */
    int norms = args_recompute_module(a, "layernorm") || a->memory_efficient_layer_norm ? 0 : 4;
    int local_heads = a->num_attention_heads / topo->tp_size;
    double attention = (double)ops->attention_workspace_bytes(a->micro_batch_size, (int)s, local_heads, (int)kv);
    double act16 = s * b * h * (30 + norms) / tp + (selective ? 0 : attention * 2.0 / ops->act_bytes);
    double slots = pipeline_activation_slots(topo->pp_size, a->virtual_pipeline_model_parallel_size > 0
                                                                ? a->virtual_pipeline_model_parallel_size : 1,
                                             a->num_micro_batches > 0 ? a->num_micro_batches : 1);
    if (slots < 1) slots = 1;
    double logits = 2 * s * b * vocab / tp * 4;  /* fp32 logits and their gradient */
    /* the layers (full recompute: the groups' inputs, 2sbh bytes, and one group) */
    double vp = a->virtual_pipeline_model_parallel_size > 0 ? a->virtual_pipeline_model_parallel_size : 1;
    double per_chunk = layers_here / vp, kept;
    double bytes16 = stack_activations(a, slots, vp, per_chunk, act16, 2 * s * b * h / tp, &kept);
    if (a->t5) {
        /* T5 (no pipeline, no experts): the layers above are the encoder's over s; the decoder's
         * over sd (its own attention workspace), each with the cross-attention's: the gathered
         * norm output, q, the attention's output, the output sum (sd b h each) and k, v over the
         * encoder (2 s b h), and the probabilities [b, heads, sd, s] unless selective; each stack
         * recomputed on its own (Megatron-Core's two TransformerBlocks); per slot the encoder's
         * output and its final norm; the logits over the decoder's tokens */
        double sd = a->decoder_seq_length;
        double self_ws = (double)ops->attention_workspace_bytes(a->micro_batch_size, (int)sd, local_heads, (int)kv);
        double cross_ws = ops->cross_attention_workspace_bytes
                              ? (double)ops->cross_attention_workspace_bytes(a->micro_batch_size, (int)sd, (int)s, local_heads)
                              : 0;
        double dec16 = sd * b * h * (30 + norms + 8) / tp + 4 * s * b * h / tp +
                       (selective ? 0 : (self_ws + cross_ws) * 2.0 / ops->act_bytes);
        double dec_kept;
        bytes16 += stack_activations(a, slots, 1, a->decoder_num_layers, dec16, 2 * sd * b * h / tp, &dec_kept) +
                   slots * 4 * s * b * h / tp;
        kept += dec_kept;
        logits = 2 * sd * b * vocab / tp * 4;
        if (selective) attention = (self_ws > attention ? self_ws : attention) + cross_ws;
    }
    m.activations = bytes16 * (ops->act_bytes / 2.0) + logits;
    /* MoE layers keep per micro-batch their fc1 outputs and expert outputs for the rows they
     * compute on (up to ep x k sb of them), and share work buffers of about six times that */
    if (a->num_experts > 0) {
        double rows = ep * k * s * b, per_layer = rows * (fc1m / tp + h) * ops->act_bytes;
        /* --recompute-modules moe: one set for all layers, written again in each backward */
        int moe_recomputed = args_recompute_module(a, "moe");
        m.activations += (moe_recomputed ? 1 : slots * kept * moe_share) * per_layer + 6 * per_layer;
        /* --keep-mlp-activation(-num-layers): the experts' activation too, in the layers that keep
         * it, unless --recompute-modules moe_act computes it again */
        double keeping = moe_recomputed || args_recompute_module(a, "moe_act") ? 0
                         : a->keep_mlp_activation_num_layers > 0 ? fmin(a->keep_mlp_activation_num_layers, per_chunk) * vp
                         : a->keep_mlp_activation                ? kept
                                                                 : 0;
        /* (with one expert-parallel rank, the experts' input rows are kept with it) */
        m.activations += slots * fmin(keeping, kept) * moe_share * rows * (fm / tp + (ep == 1 ? h : 0)) * ops->act_bytes;
        /* the shared experts keep their fc1 output (and with the gate their output) per layer
         * and micro-batch, and share work buffers of about five times that */
        double shared = s * b * (fc1s / tp + (a->moe_shared_expert_gate ? h : 0)) * ops->act_bytes;
        int shared_recomputed = moe_recomputed || args_recompute_module(a, "shared_experts");
        if (fs > 0) m.activations += (shared_recomputed ? 1 : slots * kept * moe_share) * shared + 5 * s * b * (fc1s / tp + h) * ops->act_bytes;
    }
    m.workspace = workspace_bytes + (selective ? attention : 0);
    /* --deterministic-mode's fixed tree (app/optim/fixed_tree_reduce.h): ceil(log2 m) + 1 more fp32
     * gradient buffers for m micro-batches per rank, and half a bucket to receive into */
    if (a->deterministic_mode && !fixed_tree_unsupported(ops, topo->dp_size, topo->cp_size, a->num_experts)) {
        double micro_batches = a->num_micro_batches > 1 ? a->num_micro_batches : 1;
        m.workspace += (ceil(log2(micro_batches)) + (micro_batches > 1 ? 1 : 0)) * params * 4 + params * 2;
    }
    /* --async-save's snapshot of the state this rank writes, in host memory: at most its weights
     * and its share of Adam's moments in fp32 (on CUDA it is host memory, not the device's) */
    if (a->async_save && a->save[0] && ops->host_memory) {
        double moments = a->use_distributed_optimizer ? 8 / dp : 8;
        m.workspace += params * (4 + moments);
    }
    m.total = m.parameters + m.optimizer + m.activations + m.workspace;
    return m;
}

/* a cgroup's memory limit in bytes (v2 memory.max, v1 memory.limit_in_bytes), 0 when none */
static double cgroup_limit(void) {
    const char *files[] = {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        FILE *f = fopen(files[i], "r");
        if (!f) continue;
        char text[64] = "";
        int got = fgets(text, sizeof text, f) != NULL;
        fclose(f);
        if (got && strncmp(text, "max", 3)) {
            double limit = strtod(text, NULL);
            if (limit > 0 && limit < 1e18) return limit;  /* v1 says "no limit" with a huge number */
        }
    }
    return 0;
}

/* MemAvailable from /proc/meminfo (free memory plus what the kernel can reclaim) */
static double mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    double kib = 0;
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %lf kB", &kib) == 1) break;
        fclose(f);
    }
    if (kib > 0) return kib * 1024;
    struct sysinfo info;
    return sysinfo(&info) == 0 ? ((double)info.freeram + (double)info.bufferram) * info.mem_unit : 0;
}

double memory_available_host(MPI_Comm world) {
    MPI_Comm node;
    int ranks_here = 1;
    CHECK_MPI(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    CHECK_MPI(MPI_Comm_size(node, &ranks_here));
    CHECK_MPI(MPI_Comm_free(&node));
    double available = mem_available(), limit = cgroup_limit();
    if (limit > 0 && (available == 0 || limit < available)) available = limit;
    return available / ranks_here;
}

static const char *gib(char *out, size_t size, double bytes) {
    snprintf(out, size, bytes >= 1e15 ? "%.3g GiB" : "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
    return out;
}

void memory_estimate_check(const args *a, const topology *topo, const kernel_ops *ops) {
    memory_estimate m = memory_estimate_compute(a, topo, ops);
    const double mib = 1024.0 * 1024.0;
    if (topo->world_rank == 0) {
        printf("> theoretical memory footprints: weight and optimizer=%.2f MB, activation=%.2f MB, total=%.2f MB "
               "(the busiest rank, with %.0f MB of workspace)\n", (m.parameters + m.optimizer) / mib,
               m.activations / mib, m.total / mib, m.workspace / mib);
        fflush(stdout);
    }
    const char *skip = getenv("MTC_SKIP_MEMORY_ESTIMATE"); /* tests that exercise a failed allocation */
    if (skip && atoi(skip) > 0) return;
    double available = ops->host_memory ? memory_available_host(MPI_COMM_WORLD)
                                        : ops->memory_free ? (double)ops->memory_free() : 0;
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &available, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD));
    if (available <= 0 || m.total <= available) return;
    char need[32], have[32], p[32], o[32], act[32];
    user_error("this run needs about %s per rank (parameters and gradients %s, optimizer state %s, activations %s "
               "for %d-token micro-batches, workspace) but %s of %s is available per rank: use smaller "
               "--seq-length, --hidden-size, --num-layers or --micro-batch-size, activation recomputation "
               "(--recompute-granularity full), or more ranks",
               gib(need, sizeof need, m.total), gib(p, sizeof p, m.parameters), gib(o, sizeof o, m.optimizer),
               gib(act, sizeof act, m.activations), a->seq_length, gib(have, sizeof have, available),
               ops->host_memory ? "host memory" : "GPU memory");
}

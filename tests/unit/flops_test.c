/* flops_test.c: perf/metrics against hand-computed figures. FLOPs per iteration are Megatron's
 * num_floating_point_operations (training.py, transformer_flops): per token and layer the
 * forward costs 2 h (q + 2 kv) + 2 q h (projections), 2 q s causal / 4 q s full (QK^T and
 * softmax V), 2 h ffn x 2 (x 3 with SwiGLU); plus 2 h V for the logits; x 3 for the backward.
 * BERT: the same layers with the core attention never halved, the LM head's dense 2 h^2 and logits
 * per token, the pooler's 2 h^2 and the binary head's 2 h x 2 per row. T5: the encoder as BERT's,
 * the decoder's causal self-attention, its cross-attention (query and output projections per
 * decoder token, key and value projections per encoder token, 4 q Te per decoder token) and MLP,
 * the logits per decoder token. The peak table is checked against NVIDIA's datasheet figures. */
#include "perf/metrics/flops.h"
#include "perf/metrics/peak_flops.h"
#include "tests/tap.h"

#include <math.h>

static int close_to(double a, double b) { return fabs(a - b) <= 1e-12 * fabs(b); }

/* GPT: multi-head attention, GELU MLP of 4h, no experts */
static model_shape gpt(int layers, int hidden, int heads, int seq, int vocab, int causal) {
    model_shape m = {.num_layers = layers, .hidden_size = hidden, .num_attention_heads = heads,
                     .num_query_groups = heads, .kv_channels = hidden / heads, .ffn_hidden_size = 4 * hidden,
                     .padded_vocab_size = vocab, .seq_length = seq, .causal = causal};
    return m;
}

static void gpt2_124m(void) {
    /* l 12, h 768, s 1024, V 50304 (50257 padded to 128), B 1. Per token forward:
     * layer 24 h^2 + 2 s h = 14155776 + 1572864 = 15728640, x 12 = 188743680; logits
     * 2 h V = 77266944; total 266010624, x 3 = 798031872 per token, x 1024 tokens: */
    model_shape m = gpt(12, 768, 12, 1024, 50304, 1);
    iteration_flops f = flops_per_iteration(&m, 1, NULL);
    tap_ok(f.model == 817184636928.0, "GPT-2 124M, B 1: %.0f model FLOPs = 817184636928 by hand", f.model);
    double l = 12, h = 768, s = 1024, V = 50304;
    tap_ok(close_to(f.model, 72 * s * l * h * h * (1 + s / (12 * h) + V / (12 * l * h))),
           "GPT-2 124M causal = 72 B s l h^2 (1 + s/(12h) + V/(12 l h))");
    tap_ok(f.hardware == f.model, "no recomputation: hardware FLOPs = model FLOPs (HFU = MFU)");
}

static void gpt3_175b(void) {
    /* Megatron's published GPT-3 175B run: l 96, h 12288, 96 heads, s 2048, V 51200 (50257 padded
     * to 128 x TP 8), B 1536. The paper's closed form (Narayanan et al. 2021, eq. 3) counts
     * attention without the causal mask: 72 B s l h^2 (1 + s/(6h) + V/(12 l h))
     * = 72 x 1536 x 2048 x 96 x 12288^2 x (1 + 0.027778 + 0.003617) = 3.3862e18. */
    double B = 1536, l = 96, h = 12288, s = 2048, V = 51200;
    model_shape m = gpt(96, 12288, 96, 2048, 51200, 0);
    iteration_flops f = flops_per_iteration(&m, B, NULL);
    double paper = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
    tap_ok(close_to(f.model, paper) && close_to(f.model, 3386196746387324928.0),
           "GPT-3 175B, B 1536, not causal: %.6e = the paper's 72 B s l h^2 (1 + s/(6h) + V/(12lh)) = 3.386197e18",
           f.model);
    /* Megatron's current code halves QK^T and softmax V for the causal mask: s/(6h) -> s/(12h) */
    m.causal = 1;
    f = flops_per_iteration(&m, B, NULL);
    tap_ok(close_to(f.model, 72 * B * s * l * h * h * (1 + s / (12 * h) + V / (12 * l * h))) &&
           close_to(f.model, 3.3405978001601987e18),
           "GPT-3 175B causal (Megatron's code): %.6e = 72 B s l h^2 (1 + s/(12h) + V/(12lh))", f.model);
    /* full recompute runs every layer's forward again, not the logits: the paper's HFU count
     * 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) (eq. 4) */
    m.causal = 0;
    recompute_spec full = {RECOMPUTE_FULL, 96};
    f = flops_per_iteration(&m, B, &full);
    tap_ok(close_to(f.model, paper), "full recompute leaves model FLOPs (MFU) unchanged");
    tap_ok(close_to(f.hardware, 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))),
           "GPT-3 full recompute: hardware %.6e = 96 B s l h^2 (1 + s/(6h) + V/(16lh))", f.hardware);
    tap_ok(close_to(f.hardware - f.model, B * s * l * (24 * h * h + 4 * s * h)) && f.hardware > f.model,
           "HFU > MFU: hardware = model + one forward of the layers, B s l (24 h^2 + 4 s h)");
    recompute_spec half = {RECOMPUTE_FULL, 48};
    iteration_flops g = flops_per_iteration(&m, B, &half);
    tap_ok(close_to(g.hardware - g.model, (f.hardware - f.model) / 2), "recomputing half the layers adds half");
    recompute_spec selective = {RECOMPUTE_SELECTIVE, 0};
    g = flops_per_iteration(&m, B, &selective);
    tap_ok(close_to(g.hardware - g.model, B * s * l * 4 * s * h),
           "selective recompute adds the core attention's forward, 4 B s^2 l h (not causal)");
}

static void llama2_7b_gqa(void) {
    /* Llama-2-7B's shape with grouped-query attention (8 groups) and SwiGLU: l 32, h 4096,
     * 32 heads of 128 (q = 4096, kv = 1024), ffn 11008, V 32000, s 4096, B 1. Per token forward:
     * projections 2 x 4096 x (4096 + 2048) + 2 x 4096^2 = 83886080; core (causal) 2 q s =
     * 33554432; MLP 2 x 4096 x 11008 x 3 = 270532608; layer 387973120, x 32 = 12415139840;
     * logits 2 x 4096 x 32000 = 262144000; x 3 x 4096 tokens = 155778463825920 */
    model_shape m = {.num_layers = 32, .hidden_size = 4096, .num_attention_heads = 32, .num_query_groups = 8,
                     .kv_channels = 128, .ffn_hidden_size = 11008, .swiglu = 1, .padded_vocab_size = 32000,
                     .seq_length = 4096, .causal = 1};
    iteration_flops f = flops_per_iteration(&m, 1, NULL);
    tap_ok(f.model == 155778463825920.0, "Llama-2-7B shape, GQA 8 + SwiGLU: %.0f = 155778463825920 by hand", f.model);
    m.num_query_groups = 32;
    iteration_flops mha = flops_per_iteration(&m, 1, NULL);
    tap_ok(close_to(mha.model - f.model, 3.0 * 4096 * 32 * 2 * 4096 * 2 * (4096 - 1024)),
           "multi-head instead of GQA adds the K and V projections' 2 x 2 h (q - kv) per token and layer");
}

static void moe_top2(void) {
    /* a Mixtral-like MoE: the Llama shape above with 8 experts of ffn 14336, top-2, every layer
     * MoE: MLP 2 x 4096 x 14336 x 2 experts x 3 = 704643072 per token; layer 83886080 + 33554432 +
     * 704643072 = 822083584, x 32 = 26306674688; + logits 262144000; x 3 x 4096 = 326477644038144 */
    model_shape m = {.num_layers = 32, .hidden_size = 4096, .num_attention_heads = 32, .num_query_groups = 8,
                     .kv_channels = 128, .ffn_hidden_size = 14336, .swiglu = 1, .padded_vocab_size = 32000,
                     .seq_length = 4096, .causal = 1, .num_experts = 8, .moe_layer_freq = 1,
                     .moe_router_topk = 2, .moe_ffn_hidden_size = 14336};
    iteration_flops f = flops_per_iteration(&m, 1, NULL);
    tap_ok(f.model == 326477644038144.0, "MoE top-2 of 8: %.0f = 326477644038144 by hand", f.model);
    /* every other layer MoE (layers 0, 2, ..., 30: 16) with a 5632 shared expert; the 16 dense
     * layers run one 14336 MLP: MLP FLOPs per token 16 x 2 x 4096 x 14336 x 3 + 16 x 2 x 4096 x
     * (2 x 14336 + 5632) x 3 = 5637144576 + 13488881664; attention 32 x 117440512; logits as above:
     * 3 x 4096 x 23146266624 = 284421324275712 */
    m.moe_layer_freq = 2;
    m.moe_shared_expert_intermediate_size = 5632;
    f = flops_per_iteration(&m, 1, NULL);
    tap_ok(f.model == 284421324275712.0, "MoE every other layer + shared expert: %.0f = 284421324275712", f.model);
    /* a --moe-layer-freq pattern with 16 MoE layers anywhere counts as every other layer */
    m.moe_layer_freq = 0;
    m.moe_layers = 16;
    f = flops_per_iteration(&m, 1, NULL);
    tap_ok(f.model == 284421324275712.0, "MoE pattern of 16 MoE layers of 32: the same %.0f", f.model);
}

/* a small encoder: l 2, h 64, 4 heads of 16 (q = kv = 64), ffn 256, s 32, V 128. Per token and
 * layer, forward: projections 2 x 64 x 192 + 2 x 64 x 64 = 32768; core attention, bidirectional,
 * 4 q s = 8192; MLP 2 x 64 x 256 x 2 = 65536; the layer 106496, two layers 212992 */
static model_shape small_encoder(void) { return gpt(2, 64, 4, 32, 128, 0); }

static void bert(void) {
    /* pretrain_bert, B 4: per token 212992 + the LM head's dense 2 h^2 = 8192 + logits 2 h V =
     * 16384 = 237568, x 128 tokens = 30408704; per row the pooler 2 h^2 = 8192 + the binary head
     * 2 h x 2 = 256 = 8448, x 4 rows = 33792; forward 30442496, x 3: */
    model_shape m = small_encoder();
    bert_heads_shape pretrain = {.lm_head = 1, .pooled_outputs = 2};
    iteration_flops f = bert_flops_per_iteration(&m, &pretrain, 4, NULL);
    tap_ok(f.model == 91327488.0 && f.hardware == f.model, "BERT l 2 h 64 s 32 V 128, B 4: %.0f = 91327488 by hand",
           f.model);
    double B = 4, s = 32, l = 2, h = 64, V = 128;
    tap_ok(close_to(f.model, 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h) + 1 / (12 * l)) +
                                 3 * B * (2 * h * h + 4 * h)),
           "BERT = 72 B s l h^2 (1 + s/(6h) + V/(12lh) + 1/(12l)) + 3 B (2 h^2 + 4 h): GPT's form, attention not halved");
    m.causal = 1;
    iteration_flops g = bert_flops_per_iteration(&m, &pretrain, 4, NULL);
    tap_ok(g.model == f.model, "BERT's attention is bidirectional whatever the shape's causal says");
    model_shape full = small_encoder();
    iteration_flops gpt_count = flops_per_iteration(&full, 4, NULL);
    tap_ok(close_to(f.model - gpt_count.model, 3 * (128 * 2 * h * h + 4 * (2 * h * h + 4 * h))),
           "BERT = the non-causal GPT count + the LM head's dense per token + pooler and binary head per row");
    bert_heads_shape no_binary = {.lm_head = 1, .pooled_outputs = 0};
    g = bert_flops_per_iteration(&m, &no_binary, 4, NULL);
    tap_ok(g.model == 91327488.0 - 3 * 33792.0, "--bert-no-binary-head: no pooler or binary head (%.0f = 91226112)",
           g.model);
    /* finetune_bert MNLI: no LM head; per token 212992 x 128 = 27262976, per row the pooler 8192 +
     * 3 classes 2 x 64 x 3 = 384, x 4 rows = 34304; x 3 = 81891840 */
    bert_heads_shape mnli = {.lm_head = 0, .pooled_outputs = 3};
    g = bert_flops_per_iteration(&m, &mnli, 4, NULL);
    tap_ok(g.model == 81891840.0, "finetune_bert MNLI: the pooler and a 3-class head, no LM head (%.0f = 81891840)",
           g.model);
    /* recomputation repeats the layers only: full 128 tokens x 212992, selective 128 x 2 x 8192 */
    recompute_spec r = {RECOMPUTE_FULL, 2};
    g = bert_flops_per_iteration(&m, &pretrain, 4, &r);
    tap_ok(g.model == f.model && g.hardware - g.model == 128.0 * 212992,
           "BERT full recompute: hardware = model + the layers' forward, not the heads (%.0f)", g.hardware - g.model);
    r.granularity = RECOMPUTE_SELECTIVE;
    g = bert_flops_per_iteration(&m, &pretrain, 4, &r);
    tap_ok(g.hardware - g.model == 128.0 * 2 * 8192, "BERT selective recompute: + the core attention, not halved");
}

static void t5(void) {
    /* T5: the small encoder's shape, 2 encoder layers over Te 32, 2 decoder layers over Td 8, B 4.
     * Encoder layer per sample: 32 x 106496 = 3407872. Decoder layer per token: self-attention
     * projections 32768 + causal core 2 q Td = 1024 + MLP 65536 + cross query and output 4 h q =
     * 16384 + cross core 4 q Te = 8192 = 123904, x 8 = 991232, + the cross keys and values on the
     * encoder's 32 tokens 32 x 2 x 64 x 128 = 524288: 1515520. Logits 8 x 2 h V = 131072.
     * Per sample 2 x 3407872 + 2 x 1515520 + 131072 = 9977856, x 4 x 3: */
    encoder_decoder_shape t = {small_encoder(), 2, 8};
    iteration_flops f = t5_flops_per_iteration(&t, 4, NULL);
    tap_ok(f.model == 119734272.0 && f.hardware == f.model, "T5 2+2 layers, h 64, Te 32, Td 8, V 128, B 4: %.0f = "
           "119734272 by hand", f.model);
    double B = 4, l = 2, h = 64, Te = 32, Td = 8, V = 128;
    tap_ok(close_to(f.model, 3 * B * (l * Te * (24 * h * h + 4 * Te * h) + l * Td * (28 * h * h + 2 * Td * h + 4 * Te * h) +
                                      l * Te * 4 * h * h + 2 * Td * h * V)),
           "T5 = 3 B (Le Te (24h^2 + 4 Te h) + Ld Td (28h^2 + 2 Td h + 4 Te h) + Ld Te 4h^2 + 2 Td h V)");
    t.encoder.causal = 1;
    tap_ok(t5_flops_per_iteration(&t, 4, NULL).model == f.model, "the encoder is bidirectional whatever causal says");
    t.decoder_num_layers = 3;
    iteration_flops g = t5_flops_per_iteration(&t, 4, NULL);
    tap_ok(g.model - f.model == 3.0 * 4 * 1515520, "a third decoder layer adds one decoder layer (%.0f)",
           g.model - f.model);
    t.decoder_num_layers = 2;
    t.decoder_seq_length = 16;  /* the logits and the decoder's token-linear work double, the cross core too */
    g = t5_flops_per_iteration(&t, 4, NULL);
    tap_ok(close_to(g.model - f.model, 3 * B * (l * 8 * (28 * h * h + 4 * Te * h) + l * 2 * (16 * 16 - 8 * 8) * h +
                                                8 * 2 * h * V)),
           "a longer decoder: its self-attention core grows with Td^2 (halved), the rest with Td");
    t.decoder_seq_length = 8;
    recompute_spec r = {RECOMPUTE_FULL, 1};
    g = t5_flops_per_iteration(&t, 4, &r);
    tap_ok(g.hardware - g.model == 4.0 * (3407872 + 1515520), "T5 full recompute of 1 layer per stack: + one encoder "
           "and one decoder layer");
    r.granularity = RECOMPUTE_SELECTIVE;
    g = t5_flops_per_iteration(&t, 4, &r);
    tap_ok(g.hardware - g.model == 4.0 * (2 * 32 * 8192 + 2 * 8 * (1024 + 8192)),
           "T5 selective recompute: + the self- and cross-attention cores");
}

static void peaks(void) {
    tap_ok(peak_tflops_lookup("NVIDIA H100 80GB HBM3", PEAK_BF16) == 989.4, "H100 SXM bf16 dense 989.4");
    tap_ok(peak_tflops_lookup("NVIDIA H100 80GB HBM3", PEAK_FP8) == 1978.9, "H100 SXM fp8 dense 1978.9");
    tap_ok(peak_tflops_lookup("NVIDIA H100 PCIe", PEAK_FP16) == 756.5, "H100 PCIe fp16 dense 756.5");
    tap_ok(peak_tflops_lookup("NVIDIA H200", PEAK_TF32) == 494.7, "H200 tf32 dense 494.7");
    tap_ok(peak_tflops_lookup("NVIDIA GH200 480GB", PEAK_BF16) == 989.4, "GH200 is not taken for an H200 NVL");
    tap_ok(peak_tflops_lookup("NVIDIA A100-SXM4-40GB", PEAK_BF16) == 312.0 &&
           peak_tflops_lookup("NVIDIA A100-SXM4-80GB", PEAK_FP32) == 19.5 &&
           peak_tflops_lookup("NVIDIA A100 80GB PCIe", PEAK_TF32) == 156.0, "A100 40/80 GB: bf16 312, fp32 19.5, tf32 156");
    tap_ok(peak_tflops_lookup("NVIDIA A100-SXM4-80GB", PEAK_FP8) == 0.0, "A100 has no fp8: 0");
    tap_ok(peak_tflops_lookup("Tesla V100-SXM2-16GB", PEAK_BF16) == 0.0 && peak_tflops_lookup(NULL, PEAK_BF16) == 0.0,
           "an unknown GPU gives 0 (no MFU unless --peak-tflops)");
    tap_ok(peak_dtype_from_name("fp8") == PEAK_FP8 && peak_dtype_from_name("int8") == -1 &&
           peak_dtype_from_name(peak_dtype_name(PEAK_TF32)) == PEAK_TF32, "dtype names");
    tap_ok(flops_utilization(494.7e12, 989.4e12) == 0.5 && flops_utilization(1e12, 0) == 0.0,
           "utilization: achieved / peak, 0 without a peak");
}

int main(void) {
    gpt2_124m();
    gpt3_175b();
    llama2_7b_gqa();
    moe_top2();
    bert();
    t5();
    peaks();
    return tap_done();
}

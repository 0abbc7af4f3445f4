/* fp8_linear.h: FP8 training of the transformer layers' linear layers (issue 43; Megatron with
 * Transformer Engine: --fp8-format, --fp8-recipe delayed|tensorwise), emulated through the
 * backend's fp8 ops (kernel_ops.fp8_quantize / fp8_dequantize / fp8_amax).
 *
 * The GEMMs of linear_qkv, linear_proj, linear_fc1 and linear_fc2 of every layer in fp8 (all but
 * the --first-last-layers-bf16 ones) take their operands as an fp8 GEMM does: the forward
 * quantizes the input and the weight to E4M3 with their scales, the backward the output gradient
 * (E5M2 with --fp8-format hybrid, E4M3 with e4m3) for the input gradient and, unless
 * --no-fp8-wgrad, for the weight gradient with the quantized input (TE's fp8 wgrad; without it
 * the weight gradient uses the unquantized gradient and input, TE's override_linear_precision).
 * The GEMM then runs on the dequantized values with fp32 accumulation, which is what a cuBLASLt
 * fp8 GEMM computes (products of fp8 values are exact in fp32; the scale_inv factors are powers
 * of two apart from the scale's own rounding). Bias gradients come from the unquantized output
 * gradient (TE's fused bgrad). Attention, the norms, the embedding and the output layer stay in
 * the compute dtype. In an MoE layer (Megatron's TE grouped experts and shared experts) each local
 * expert's fc1 and fc2 are fp8 linears of their own (the grouped GEMM's row block of an expert
 * quantized with that expert's scales), the shared expert's fc1 and fc2 take the layer's
 * linear_fc1/linear_fc2 slots, and the router stays in the compute dtype.
 *
 * Scaling state: every fp8 linear has three tensors (input, weight, grad_output), each with a
 * scale and an amax history of --fp8-amax-history-len entries (TE's fp8_meta). A training
 * micro-batch records the amax of every tensor it quantizes into history entry 0 (max over the
 * step's micro-batches; evaluation records nothing). Delayed scaling: the quantization uses the
 * scale as it stood at the step's start; fp8_step_end (after the step's backward) reduces the
 * recorded amaxes with MAX over the tensor-parallel group and then the data-parallel x
 * context-parallel group (Megatron's amax reduction group, TE's reduce_amax over fp8_group: all
 * ranks of a pipeline stage agree). The experts' amaxes reduce over the ranks that hold the same
 * experts (the expert-data-parallel group; with --expert-tensor-parallel-size other than the
 * tensor-parallel size, the expert tensor-parallel x expert-data-parallel group in place of the
 * tensor-parallel one, whose ranks then hold other experts or other tokens): TE reduces every tensor of the autocast region over
 * the one group, which with expert parallelism would meet other experts' amaxes. Then TE's update
 * (kernels/fp8_recipe.h): history roll, amax = max or most_recent, scale = fp8_max * 2^-margin /
 * amax. TE updates at every fp8_autocast exit, i.e. per micro-batch; here once per optimizer
 * step, which is the same with one micro-batch per step and makes a data-parallel run equal to
 * one rank that accumulates the same global batch. Tensorwise (TE's Float8CurrentScaling): each quantization takes its scale from
 * the tensor's own amax (fp8_current_scale); the history is not used. Since the gathered input
 * of a column-parallel layer is quantized whole, its amax is the whole tensor's as TE's amax
 * reduction over the tensor-parallel group makes it; a weight shard's scale is its own, as TE's.
 *
 * Checkpoints: each fp8 linear's state is the tensor
 *   /model/decoder.layers.L.self_attention.linear_qkv._extra_state   [3, 1 + history_len]
 * (likewise linear_proj, mlp.linear_fc1, mlp.linear_fc2; TE's _extra_state of the module): rows
 * input, weight, grad_output; column 0 the scale, columns 1.. the amax history (entry 0 first).
 * Written by tensor- and data-parallel rank 0 of the stage. An MoE layer has
 * mlp.shared_experts.linear_fc1/2 (with a shared expert) and mlp.experts.linear_fc1/2
 * [3 x num_experts, 1 + history_len] (rows 3e.. expert e's), written by the expert-data-parallel
 * and expert tensor-parallel rank 0 holding each expert. */
#ifndef FP8_LINEAR_H
#define FP8_LINEAR_H

#include <stddef.h>

#include "app/checkpoint/sharded_state.h"
#include "app/model/gpt_model.h"

typedef enum { FP8_GEMM_QKV, FP8_GEMM_PROJ, FP8_GEMM_FC1, FP8_GEMM_FC2, FP8_GEMMS } fp8_gemm;
typedef enum { FP8_ROLE_INPUT, FP8_ROLE_WEIGHT, FP8_ROLE_GRAD_OUTPUT, FP8_ROLES } fp8_role;

/* whether global layer `layer` runs its linear layers in fp8 (Megatron's get_fp8_context:
 * fp8 on and not one of the --first-last-layers-bf16 layers) */
int fp8_layer_in_fp8(const gpt_config *c, int layer);
/* the number of the config's layers in fp8 */
int fp8_layers_in_fp8(const gpt_config *c);

/* the scaling state (scales 1, histories 0: TE's start) and the scratch, when fp8 is on; the
 * backend must have the fp8 ops (kernel_ops.fp8_quantize, else one clear error) */
void fp8_state_allocate(gpt_model *m);
void fp8_state_release(gpt_model *m);

/* the following micro-batches record amaxes (training) or not (evaluation) */
void fp8_set_recording(gpt_model *m, int recording);

/* operand x [n] of `gemm` of global layer `layer` in role `role` as the fp8 GEMM reads it:
 * quantized with its scale, the amax recorded, dequantized into the role's scratch (valid until
 * the next call for the same role); x itself when the layer is not in fp8 */
const void *fp8_operand(gpt_model *m, int layer, fp8_gemm gemm, fp8_role role, const void *x, size_t n);
/* the weight gradient's operands: the fp8 ones unless --no-fp8-wgrad */
int fp8_wgrad_in_fp8(const gpt_model *m);
/* kernel_ops.matmul_backward in fp8 when the layer is (dgrad Q(dout) Q(W), wgrad Q(dout)^T Q(x)
 * or dout^T x with --no-fp8-wgrad, dbias from dout), else the plain call: the shared experts' */
void fp8_matmul_backward(gpt_model *m, int layer, fp8_gemm gemm, void *dx, float *dweight, float *dbias,
                         const void *dout, const void *x, const void *weight, int N, int IC, int OC);

/* MoE layer `layer`'s local experts in fp8 (which: 0 fc1, 1 fc2): whether they are; the grouped
 * GEMM's operand x (row block g of rows[g]..rows[g+1], width columns, expert g's scale for role)
 * and weights as the fp8 GEMM reads them (x and weight themselves when not in fp8; valid until
 * the next call for the same role); kernel_ops.grouped_matmul_backward with fp8 operands */
int fp8_experts_in_fp8(const gpt_model *m, int layer);
const void *fp8_expert_rows(gpt_model *m, int layer, int which, fp8_role role, const void *x, const int *rows,
                            int groups, int width);
const void *const *fp8_expert_weights(gpt_model *m, int layer, int which, const void *const *weight, int groups,
                                      size_t numel);
void fp8_expert_backward(gpt_model *m, int layer, int which, void *dx, float *const *dweight, const void *dout,
                         const void *x, const void *const *weight, const int *rows, int groups, int IC, int OC);
/* kernel_ops.grouped_matmul_forward of the local experts' fc1/fc2 (which 0/1), x [rows[groups], IC]
 * -> out [rows[groups], OC], on fp8 operands in an fp8 layer (the plain call otherwise). With the
 * fp8 GEMMs (fp8_native) this and fp8_expert_backward run one fp8 GEMM per non-empty expert row
 * block (forward, input gradient, weight gradient: the dense linears' three), each expert on its
 * own scaling state (the tensors and amaxes the emulation records), where
 * fp8_experts_native_shapes(IC, OC); otherwise the emulation above */
void fp8_expert_forward(gpt_model *m, int layer, int which, void *out, const void *x, const void *const *weight,
                        const int *rows, int groups, int IC, int OC);
/* whether an expert GEMM of width IC -> OC meets cuBLASLt's fp8 layout rules (both multiples of
 * 16; a row block's count is padded for the weight gradient): else that linear stays emulated */
int fp8_experts_native_shapes(int IC, int OC);

/* after a training step's backward: reduce the step's amaxes (MAX over the model's
 * tensor-parallel group, then amax_group, data x context parallel, or for the experts
 * expert_amax_group, the expert-data-parallel group, which with an expert tensor-parallel size
 * other than tp replaces the tensor-parallel group for them and must be the expert
 * tensor-parallel x expert-data-parallel group) and update the scales (delayed); nothing
 * without fp8 or with tensorwise scaling */
void fp8_step_end(gpt_model *m, const comm_group *amax_group, const comm_group *expert_amax_group);

/* The fp8 GEMMs themselves (a backend with kernel_ops.fp8_linear_forward, fp8_gemm and
 * fp8_transpose: CUDA, where they are the default and MTC_FP8_EMULATE=1 keeps the emulation;
 * the CPU, whose fp8 GEMMs are the reference of CUDA's (kernels/cpu/cpu_fp8_gemm.c: the codes
 * decoded exactly, fp32 sums, times the two scale_inv), takes them only with MTC_FP8_NATIVE=1 so
 * that its default numbers stay the emulation's; MTC_FP8_EMULATE=1 wins): the layers' linears
 * quantize their operands to codes and run cuBLASLt fp8 GEMMs, the forward with the bias and the
 * residual fused, the input gradient with the weight's transposed codes, the weight gradient
 * with the transposed codes of the output gradient and the input (TE's three GEMMs; the input's
 * codes kept from the forward where fp8_keeps_input_codes says so, else the input quantized
 * again in the backward with the same scale: the same codes). The quantization records the same
 * amaxes as the emulation. In an MoE layer the shared expert's fc1/fc2 take this path too
 * (fp8_matmul_backward dispatches to it), and so do the local experts' grouped GEMMs, one fp8
 * GEMM per non-empty expert (fp8_expert_forward, fp8_expert_backward; their weights are
 * quantized at each use: the step's weight cache below is the layer linears').
 * fp8_native: whether layer `layer`'s own linears take this path. */
int fp8_native(const gpt_model *m, int layer);
/* whether the environment asks for the fp8 GEMMs on a backend that has them (cpu_backend: the
 * CPU's, MTC_FP8_NATIVE=1; else unless MTC_FP8_EMULATE=1); one clear error for a value other than
 * 0 or 1 */
int fp8_native_requested(int cpu_backend);
/* MTC_FP8_EXPERTS_EMULATE=1: with the fp8 GEMMs, the MoE experts' grouped GEMMs stay emulated
 * (the path before they ran as fp8 GEMMs: an A/B of the two; the shared experts follow the layer) */
int fp8_experts_emulation_requested(void);
/* out [N,OC] = Q(x) Q(W)^T + bias + residual (each may be NULL); x_codes: where x's codes are
 * kept for the backward (fp8_keeps_input_codes; written here unless x's producer wrote them
 * there), NULL for the scratch */
void fp8_native_forward(gpt_model *m, int layer, fp8_gemm gemm, void *out, const void *x, const void *weight,
                        const void *bias, const void *residual, int N, int IC, int OC, uint8_t *x_codes);
/* dx = Q(dout) Q(W) (overwritten; skipped when NULL), dweight += Q(dout)^T Q(x) (dout^T x with
 * --no-fp8-wgrad; the step's first write overwrites; skipped when NULL), dbias += column sums of
 * the unquantized dout (skipped when NULL); with x_codes (the forward's kept codes of x) the
 * weight gradient transposes them and x is not read */
void fp8_native_backward(gpt_model *m, int layer, fp8_gemm gemm, void *dx, float *dweight, float *dbias,
                         const void *dout, const void *x, const void *weight, int N, int IC, int OC,
                         const uint8_t *x_codes);

/* Kept input codes (TE's saved fp8 input of LayerNormLinear): with the fp8 GEMMs and delayed
 * scaling, linear_qkv's and a dense linear_fc1's input (the norms' gathered outputs [N, C]) is
 * kept for the backward as its fp8 codes, 1 byte an element, instead of in the compute dtype:
 * the norm writes its output into one scratch the layers share and the codes into the layer's
 * buffer (its fused producer, or the forward GEMM's quantization), and the backward's weight
 * gradient transposes the codes instead of quantizing the output again (the same codes: the
 * scale cannot change inside a step). It saves [N, C] bytes twice per layer and a quantization
 * pass each. Not with --no-fp8-wgrad (the weight gradient reads the unquantized input),
 * tensorwise scaling (its scale is the tensor's own, made again in the backward), --recompute-
 * modules layernorm (nothing kept), --memory-efficient-layer-norm (its backward reads the
 * outputs), --tp-comm-overlap (the outputs are the gather's windows), nor MTC_FP8_KEEP_CODES=0.
 * Decided from the configuration and the backend alone, so before fp8_state_allocate. */
int fp8_keeps_input_codes(const gpt_model *m, int layer, fp8_gemm gemm);

/* The weight codes once per step (delayed scaling with the fp8 GEMMs: TE's fp8 weight
 * workspaces): a layer linear's weight is quantized with its transpose by the first training
 * micro-batch of a step that uses it, and the later micro-batches' forwards, recomputed forwards
 * and the backward reuse the codes (its scale cannot change inside a step; its amax, recorded
 * once, is the same max). Valid until fp8_step_end or fp8_weights_changed (gpt_model_start_grads
 * calls it at a step's start); evaluation quantizes afresh. MTC_FP8_WEIGHT_CACHE picks what is
 * kept: off (the default: the weights quantized at every use), transposed (1 byte a weight of the
 * fp8 layers, the backward's transposed codes; the forward quantizes again at each later
 * micro-batch of the step) or both (2 bytes, TE's fp8 weight workspaces: the forward's codes too).
 * Off is the default for issue 43's memory target (fp8's peak no higher than bf16's): on one H200
 * with one micro-batch a step the cache saved 0.75% of the GPT 1.3B step (199.3 against 200.8 ms)
 * and 0.6% of the Llama-3.2-1B one, and cost 1.1 and 0.9 GB, which put both above bf16's peak
 * (perf/results/peer/fp8-vs-bf16-h200-2026-11-30-c.md); with gradient accumulation "both" saves
 * one weight quantization per layer linear and micro-batch. */
typedef enum { FP8_WEIGHT_CACHE_OFF, FP8_WEIGHT_CACHE_TRANSPOSED, FP8_WEIGHT_CACHE_BOTH } fp8_weight_cache;
/* the mode MTC_FP8_WEIGHT_CACHE names (one clear error for another value) */
fp8_weight_cache fp8_weight_cache_mode(void);
/* the weights (or their scales) changed: the next use quantizes them afresh */
void fp8_weights_changed(gpt_model *m);

/* The fused producers (TE's fused casts; kernel_ops' *_fp8 ops, kernels.h's fp8_output): the
 * kernel that makes a layer linear's input (the norm before linear_qkv and linear_fc1, the
 * activation before linear_fc2) writes its fp8 codes and records its amax too, instead of the
 * linear quantizing it again. fp8_input_codes: whether the producer of x [n] (the input of
 * `gemm` of layer `layer`) may (the fp8 GEMMs, delayed scaling: the scale is known before the
 * tensor; not with MTC_FP8_FUSE=0), filling *q; the caller must then run the fused producer
 * (it checks that the backend has it first), and the next fp8_native_forward of that linear
 * with that x takes the codes as they are. The same codes and amax as quantizing after. x_codes:
 * where they are kept (fp8_keeps_input_codes), NULL for the scratch. */
int fp8_input_codes(gpt_model *m, int layer, fp8_gemm gemm, const void *x, size_t n, fp8_output *q, uint8_t *x_codes);
/* likewise for the output gradient dout [n] of `gemm` (the GeLU's or SwiGLU's backward before linear_fc1's),
 * its codes and their transpose (*codes_t): only where the weight gradient is in fp8 too (the
 * backward then reads both); the next fp8_native_backward of that linear with that dout takes them */
int fp8_grad_output_codes(gpt_model *m, int layer, fp8_gemm gemm, const void *dout, size_t n, fp8_output *q,
                          uint8_t **codes_t);
/* likewise the backward's input x [n] of `gemm` with its transposed codes (the activation made again
 * in the backward as fc2's input): the next fp8_native_backward of that linear with that x
 * takes them for the weight gradient */
int fp8_input_transposed_codes(gpt_model *m, int layer, fp8_gemm gemm, const void *x, size_t n, fp8_output *q,
                               uint8_t **codes_t);

/* whether fp8 layer `layer`'s MLP activation (fc2's input) may be written in the forward as its
 * fp8 codes only, where it lives in scratch: the fp8 GEMM reads the codes, and the MLP backward
 * makes it again from fc1's output (with the fused MLP passes, unless MTC_FP8_MLP_FUSED=0) */
int fp8_activation_codes_only(gpt_model *m, int layer);

/* The MLP backward's elementwise pass fused (kernel_ops.mlp_backward_fp8, TE's
 * dgelu_cast_transpose_dbias): fc2's backward from dout [N, C] with the activation's backward
 * between its GEMMs, where the unfused path ran fc2's input x [N, F] made again with its codes
 * and transposed codes, fc2's weight gradient, fc2's input gradient written over x, the
 * activation's backward with fc1's output-gradient codes, and fc1's bias gradient over dpre.
 * Here: dout's codes and transposed codes; fc2's input gradient into dact [N, F]; one pass over
 * pre (fc1's output, [N, F], SwiGLU [N, 2F]) and dact writing only x's transposed codes (its amax
 * recorded as the remake's), fc1's output-gradient codes and transposed codes and, with
 * fc1_dbias, fc1's bias gradient; then fc2's weight gradient (fc2_dweight, the step's first write
 * overwrites). The next fp8_native_backward of fc1 with dout dpre takes the codes; dpre [N, F or
 * 2F] is scratch (not written where the backend's fused kernel takes the shape). The same codes,
 * amaxes, GEMMs and bias sums as the unfused path, so the same bits. Returns 0, having done
 * nothing, unless the fp8 GEMMs run with fp8 wgrad and the fused producers (delayed scaling;
 * not with MTC_FP8_FUSE=0 nor MTC_FP8_MLP_FUSED=0) and the backend has the op (not the CPU). */
int fp8_mlp_backward_fused(gpt_model *m, int layer, int swiglu, float *fc2_dweight, float *fc1_dbias, void *dact,
                           void *dpre, const void *pre, const void *dout, const void *fc2_weight, int N, int F, int C);

/* the checkpoint name of a layer's linear's scaling state (an MoE layer's fc1/fc2: its shared expert's) */
void fp8_extra_state_name(const gpt_config *c, int layer, fp8_gemm gemm, char *out, size_t size);
/* declares the _extra_state tensor of every fp8 linear (in layer order) and adds those held
 * here (written by tensor-parallel rank 0 with dp_rank 0); nothing without fp8 */
void fp8_sharded_state(const gpt_model *m, int dp_rank, sharded_state *state);

/* the start-up line naming the recipe, e.g. "fp8: hybrid format (E4M3 forward, E5M2 gradients),
 * delayed scaling (amax history 1024, max, margin 0), fp8 wgrad; 2 of 2 layers in fp8" */
void fp8_describe(const gpt_config *c, char *out, size_t size);

#endif

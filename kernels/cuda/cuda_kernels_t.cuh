/* cuda_kernels_t.cuh: the 16-bit element types the CUDA kernels are templated on. Every kernel
 * that reads or writes activations or parameters is a template on E, the compute dtype:
 * __nv_bfloat16 (the bf16 backend, kernels_cuda()) or __half (the fp16 backend,
 * kernels_cuda_fp16(), --fp16). Arithmetic is fp32 in both; E only decides how a value is
 * rounded when stored (to_float / from_float) and which tensor-core instruction multiplies
 * (cuda_attention.cu). The C entry points cuda_X (bf16) and cuda_X_fp16 (fp16) of
 * cuda_kernels.h are one-line instantiations of these templates. Device code only. */
#ifndef CUDA_KERNELS_T_CUH
#define CUDA_KERNELS_T_CUH

#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <library_types.h>

/* the C storage types (uint16_t) and CUDA's 16-bit types have the same bits */
static inline __half *as_half(fp16 *p) { return reinterpret_cast<__half *>(p); }
static inline const __half *as_half(const fp16 *p) { return reinterpret_cast<const __half *>(p); }

/* whether E is fp16 (else bf16), for the few places that differ beyond rounding */
template <typename E> struct is_fp16 : std::is_same<E, __half> {};

/* the cuBLASLt / cuBLAS data type of E */
template <typename E> static inline cudaDataType_t cuda_data_type(void) {
    return is_fp16<E>::value ? CUDA_R_16F : CUDA_R_16BF;
}

/* ---- scalar conversions: fp32 <-> E, round to nearest even ---- */
static __device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
static __device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

template <typename E> __device__ __forceinline__ E from_float(float x);
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }

/* ---- pairs: two floats rounded into one 32-bit register, lo at the lower address ---- */
template <typename E> __device__ __forceinline__ uint32_t pack_x2(float lo, float hi) {
    uint32_t bits;
    if constexpr (is_fp16<E>::value) {
        __half2 pair = __floats2half2_rn(lo, hi);
        bits = *reinterpret_cast<uint32_t *>(&pair);
    } else {
        __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
        bits = *reinterpret_cast<uint32_t *>(&pair);
    }
    return bits;
}

static __device__ __forceinline__ float2 unpack_x2(__nv_bfloat162 pair) { return __bfloat1622float2(pair); }
static __device__ __forceinline__ float2 unpack_x2(__half2 pair) { return __half22float2(pair); }

/* the 2-element vector type of E */
template <typename E> struct pair_of;
template <> struct pair_of<__nv_bfloat16> { typedef __nv_bfloat162 type; };
template <> struct pair_of<__half> { typedef __half2 type; };

/* ---- 8 elements <-> 8 floats through one 128-bit access (p must be 16-byte aligned) ---- */
template <typename E> static __device__ __forceinline__ void load_x8(float out[8], const E *p) {
    uint4 raw = *reinterpret_cast<const uint4 *>(p);
    const typename pair_of<E>::type *pairs = reinterpret_cast<const typename pair_of<E>::type *>(&raw);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 f = unpack_x2(pairs[i]);
        out[2 * i] = f.x;
        out[2 * i + 1] = f.y;
    }
}
template <typename E> static __device__ __forceinline__ void store_x8(E *p, const float in[8]) {
    uint4 raw;
    uint32_t *words = reinterpret_cast<uint32_t *>(&raw);
#pragma unroll
    for (int i = 0; i < 4; i++) words[i] = pack_x2<E>(in[2 * i], in[2 * i + 1]);
    *reinterpret_cast<uint4 *>(p) = raw;
}

#endif /* CUDA_KERNELS_T_CUH */

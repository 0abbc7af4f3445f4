/* fp8_format.h: the two 8-bit floating-point formats of FP8 training (issue 43), bit-exact with
 * what the GPU's conversion does (cvt.rn.satfinite.e4m3x2/e5m2x2.f32, i.e. the __nv_fp8_e4m3 and
 * __nv_fp8_e5m2 constructors Transformer Engine's casts use), so the CPU backend emulates fp8:
 *  - E4M3 (OCP "e4m3fn"): sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinities; NaN is
 *    S.1111.111; largest finite 448 (S.1111.110); smallest subnormal 2^-9.
 *  - E5M2: sign, 5 exponent bits (bias 15), 2 mantissa bits; IEEE-like: infinities S.11111.00,
 *    NaN S.11111.{01,10,11}; largest finite 57344; smallest subnormal 2^-16.
 * fp32 -> fp8 rounds to nearest, ties to even, in one rounding (subnormals included) and
 * saturates: every value beyond the largest finite, infinities included, becomes +-max (TE's
 * cast). NaN becomes the canonical NaN 0x7F in both formats; a value that rounds to zero keeps
 * its sign. fp8 -> fp32 is exact. Header-only, for C and CUDA alike (as philox.h). */
#ifndef FP8_FORMAT_H
#define FP8_FORMAT_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define FP8_FN static __host__ __device__ inline
#else
#define FP8_FN static inline
#endif

/* the fp8 formats (the `format` argument of the kernel ops and of the recipe) */
typedef enum fp8_format { FP8_E4M3 = 0, FP8_E5M2 = 1 } fp8_format;

#define FP8_E4M3_MAX 448.0f
#define FP8_E5M2_MAX 57344.0f
#define FP8_NAN_CODE 0x7Fu /* the canonical NaN a conversion writes, in both formats */

FP8_FN float fp8_max_of(int format) { return format == FP8_E5M2 ? FP8_E5M2_MAX : FP8_E4M3_MAX; }

FP8_FN uint32_t fp8_float_bits(float x) {
#ifdef __CUDA_ARCH__
    return (uint32_t)__float_as_uint(x);
#else
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
#endif
}

FP8_FN float fp8_bits_float(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
#endif
}

/* x (fp32) to fp8 with mantissa_bits 3 (E4M3) or 2 (E5M2) and that format's bias */
FP8_FN uint8_t fp8_encode_bits(float x, int mantissa_bits, int bias, uint32_t max_bits, uint32_t max_code) {
    uint32_t u = fp8_float_bits(x);
    uint32_t sign = (u >> 24) & 0x80u;
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint8_t)FP8_NAN_CODE;
    if (a > max_bits) return (uint8_t)(sign | max_code); /* saturate (infinity included) */
    int e = (int)(a >> 23) - 127;                         /* unbiased exponent of a normal fp32 */
    if ((a >> 23) == 0) return (uint8_t)sign;             /* fp32 zero or subnormal: < 2^-126 */
    uint32_t mant = a & 0x7FFFFFu;
    uint32_t combined; /* the value as (fp8 exponent field, 23-bit mantissa) before rounding */
    int shift;         /* bits to round off */
    if (e >= 1 - bias) {
        combined = ((uint32_t)(e + bias) << 23) | mant;
        shift = 23 - mantissa_bits;
    } else {            /* fp8 subnormal: in units of 2^(1 - bias - mantissa_bits) */
        combined = mant | 0x800000u;
        shift = 23 - mantissa_bits + (1 - bias - e);
        if (shift > 31) return (uint8_t)sign; /* below a quarter of the smallest subnormal */
    }
    uint32_t code = combined >> shift;
    uint32_t rest = combined & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (code & 1u))) code++; /* a carry moves up the exponent */
    return (uint8_t)(sign | code);
}

FP8_FN uint8_t fp8_e4m3_from_float(float x) { return fp8_encode_bits(x, 3, 7, 0x43E00000u, 0x7Eu); }
FP8_FN uint8_t fp8_e5m2_from_float(float x) { return fp8_encode_bits(x, 2, 15, 0x47600000u, 0x7Bu); }

FP8_FN float fp8_e4m3_to_float(uint8_t c) {
    uint32_t sign = (uint32_t)(c & 0x80u) << 24, exponent = (c >> 3) & 0xFu, mant = c & 0x7u;
    if ((c & 0x7Fu) == 0x7Fu) return fp8_bits_float(sign | 0x7FC00000u);
    if (exponent == 0) return fp8_bits_float(sign | fp8_float_bits((float)mant * 0.001953125f)); /* 2^-9 */
    return fp8_bits_float(sign | ((exponent - 7u + 127u) << 23) | (mant << 20));
}

FP8_FN float fp8_e5m2_to_float(uint8_t c) {
    uint32_t sign = (uint32_t)(c & 0x80u) << 24, exponent = (c >> 2) & 0x1Fu, mant = c & 0x3u;
    if (exponent == 31u) return fp8_bits_float(sign | (mant ? 0x7FC00000u : 0x7F800000u));
    if (exponent == 0) return fp8_bits_float(sign | fp8_float_bits((float)mant * 1.52587890625e-5f)); /* 2^-16 */
    return fp8_bits_float(sign | ((exponent - 15u + 127u) << 23) | (mant << 21));
}

FP8_FN uint8_t fp8_from_float(float x, int format) {
    return format == FP8_E5M2 ? fp8_e5m2_from_float(x) : fp8_e4m3_from_float(x);
}
FP8_FN float fp8_to_float(uint8_t c, int format) {
    return format == FP8_E5M2 ? fp8_e5m2_to_float(c) : fp8_e4m3_to_float(c);
}

#endif /* FP8_FORMAT_H */

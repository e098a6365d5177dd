// FNet's Fourier mixing sublayer (Lee-Thorp et al. 2021, arXiv 2105.03824,
// section 3.1; google-research/f_net fourier.py; Hugging Face FNetBasicFourierTransform):
//   y = Re(DFT_length(DFT_embed(x)))  per example,
//     = Re(F_L . X . F_d) = C_L X C_d - S_L X S_d,  F_n[j,k] = exp(-2 pi i jk/n),
//   C_n = cos(2 pi jk/n), S_n = sin(2 pi jk/n),
// unnormalised (jnp.fft.fftn's default norm) and with nothing learned. The
// padding is mixed like any other position (FNet ignores the mask here).
//
// x: [..., length=L, ..., embed=d, ...] floating, any dim order; every other
// dim is a batch dim. Output: x's shape and dtype (16-bit inputs are mixed in
// float32 and rounded once). Gradient: C and S are symmetric, so the map is
// its own transpose and the vjp applies it to the cotangent.
// Sharded: a split batch dim stays local; a split length or embed dim is
// all-gathered first (the transform needs whole rows and columns).
// Deterministic run to run; bits may differ between CPU types (FFTW chooses
// its SIMD code for the CPU).
// Errors: std::invalid_argument "[fourier_mix] ..." for a missing dim, the
// same dim given twice or a non-floating x.
#pragma once
#include <string>

#include "core/array.h"

namespace t5x {

// The FFTW kernel (the CPU backend's fourier family), or the reference when
// fused kernels are disabled (ops/fused.h).
Array fourier_mix(const Array& x, const std::string& length = "length", const std::string& embed = "embed");
// Plain-op decomposition (two products with the cos / sin matrices each, in
// float32): the kernel's oracle, and the matmul path of f_net's
// `use_fft=False`. O(L d (L + d)) work.
Array fourier_mix_reference(const Array& x, const std::string& length = "length",
                            const std::string& embed = "embed");

}  // namespace t5x

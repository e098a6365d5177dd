// FNet's Fourier mixing on FFTW (libfftw3-dev, single precision): one
// out-of-place 2-D real-to-complex transform per example, then the real part
// of the full spectrum read from FFTW's half spectrum by Hermitian symmetry.
#include <fftw3.h>

#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "backend/kernels.h"

namespace t5x::kernels::cpu {
namespace {

// FFTW's planner is not thread-safe (only fftw_execute* is), so plans are made
// once per [length, embed] under a lock and kept for the process. Plans are
// made with FFTW_ESTIMATE (no timing runs), so the chosen algorithm, and hence
// every result bit, does not depend on the machine's load.
fftwf_plan plan_for(int64_t length, int64_t embed) {
  static std::mutex mu;
  static std::map<std::pair<int64_t, int64_t>, fftwf_plan> plans;
  std::lock_guard<std::mutex> lock(mu);
  auto it = plans.find({length, embed});
  if (it != plans.end()) return it->second;
  float* in = fftwf_alloc_real(size_t(length * embed));
  fftwf_complex* out = fftwf_alloc_complex(size_t(length * (embed / 2 + 1)));
  fftwf_plan p = fftwf_plan_dft_r2c_2d(int(length), int(embed), in, out, FFTW_ESTIMATE | FFTW_PRESERVE_INPUT);
  fftwf_free(in);
  fftwf_free(out);
  plans.emplace(std::make_pair(length, embed), p);
  return p;
}

}  // namespace

void fourier_mix(int64_t batch, int64_t length, int64_t embed, const float* x, float* y) {
  const int64_t n = length * embed, half = embed / 2 + 1;
  if (batch == 0 || n == 0) return;
  fftwf_plan plan = plan_for(length, embed);
  // Threads split the batch; each has its own aligned buffers (new-array
  // execution needs the planning arrays' alignment, which fftwf_malloc gives).
#pragma omp parallel if (batch > 1 && n * batch >= (1 << 15))
  {
    float* in = fftwf_alloc_real(size_t(n));
    fftwf_complex* spec = fftwf_alloc_complex(size_t(length * half));
#pragma omp for schedule(static)
    for (int64_t b = 0; b < batch; ++b) {
      const float* xb = x + b * n;
      float* src = const_cast<float*>(xb);  // r2c with FFTW_PRESERVE_INPUT only reads it
      if (fftwf_alignment_of(src) != 0) {
        std::memcpy(in, xb, size_t(n) * sizeof(float));
        src = in;
      }
      fftwf_execute_dft_r2c(plan, src, spec);
      float* yb = y + b * n;
      for (int64_t j = 0; j < length; ++j) {
        const fftwf_complex* row = spec + j * half;
        // Columns past embed/2: Y[j, k] = conj(Y[-j, -k]), the same real part.
        const fftwf_complex* mirror = spec + ((length - j) % length) * half;
        for (int64_t k = 0; k < half; ++k) yb[j * embed + k] = row[k][0];
        for (int64_t k = half; k < embed; ++k) yb[j * embed + k] = mirror[embed - k][0];
      }
    }
    fftwf_free(in);
    fftwf_free(spec);
  }
}

}  // namespace t5x::kernels::cpu

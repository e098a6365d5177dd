#include "backend/cpu/cross_entropy.h"

#include <stdexcept>

#include "test_util.h"

namespace t5x::cpu {
namespace {
using testing::random_vec;

// t5x compute_weighted_cross_entropy (weights = 1), written the long way:
// explicit soft targets and log_softmax, in double.
void naive(int64_t rows, int64_t V, const std::vector<float>& x, const std::vector<int32_t>& t,
           double z, double ls, std::vector<double>& loss, std::vector<double>& zl) {
  double conf = 1 - ls, low = ls / double(V - 1);
  double norm = -(conf * std::log(conf) + double(V - 1) * low * std::log(low + 1e-20));
  for (int64_t r = 0; r < rows; ++r) {
    double m = -1e300;
    for (int64_t v = 0; v < V; ++v) m = std::max(m, double(x[r * V + v]));
    double s = 0;
    for (int64_t v = 0; v < V; ++v) s += std::exp(x[r * V + v] - m);
    double lse = m + std::log(s), l = 0;
    for (int64_t v = 0; v < V; ++v) l -= (v == t[r] ? conf : low) * (x[r * V + v] - lse);
    zl[r] = z * lse * lse;
    loss[r] = l + zl[r] - norm;
  }
}

std::vector<int32_t> random_targets(int64_t rows, int64_t V, uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<int32_t> t(rows);
  for (auto& v : t) v = int32_t(g() % uint32_t(V));
  return t;
}

TEST(CrossEntropy, UniformLogitsGiveLogVocab) {
  std::vector<float> x(4, 0.f), loss(1), zl(1), lse(1);
  std::vector<int32_t> t{2};
  cross_entropy_forward(1, 4, x.data(), t.data(), {1e-4f, 0.f}, loss.data(), zl.data(), lse.data());
  EXPECT_NEAR(lse[0], std::log(4.0), 1e-6);
  EXPECT_NEAR(zl[0], 1e-4 * std::log(4.0) * std::log(4.0), 1e-9);
  EXPECT_NEAR(loss[0], std::log(4.0) + zl[0], 1e-6);
}

TEST(CrossEntropy, ForwardMatchesT5xFormula) {
  for (auto [rows, V] : {std::pair<int64_t, int64_t>{3, 5}, {17, 1000}, {4, 32128}}) {
    for (float ls : {0.f, 0.1f}) {
      auto x = random_vec(rows * V, uint32_t(V), -8, 8);
      auto t = random_targets(rows, V, 3);
      std::vector<float> loss(rows), zl(rows);
      cross_entropy_forward(rows, V, x.data(), t.data(), {1e-4f, ls}, loss.data(), zl.data(), nullptr);
      std::vector<double> rl(rows), rz(rows);
      naive(rows, V, x, t, 1e-4, ls, rl, rz);
      for (int64_t r = 0; r < rows; ++r) {
        EXPECT_NEAR(loss[r], rl[r], 2e-5 * (1 + std::fabs(rl[r]))) << "V=" << V << " ls=" << ls;
        EXPECT_NEAR(zl[r], rz[r], 1e-6 * (1 + rz[r]));
      }
    }
  }
}

TEST(CrossEntropy, LargeLogitsStayFinite) {
  std::vector<float> x{1000.f, 0.f, -1000.f}, loss(1);
  std::vector<int32_t> t{1};
  cross_entropy_forward(1, 3, x.data(), t.data(), {}, loss.data(), nullptr, nullptr);
  EXPECT_NEAR(loss[0], 1000.0, 1e-3);
}

TEST(CrossEntropy, BackwardMatchesFiniteDifferences) {
  int64_t rows = 4, V = 37;
  auto x = random_vec(rows * V, 11, -3, 3);
  auto t = random_targets(rows, V, 12);
  auto g = random_vec(rows, 13, 0.5, 2);  // dloss
  CrossEntropyOptions opt{0.05f, 0.1f};   // large z so its term shows
  std::vector<float> dx(x.size()), lse(rows), loss(rows);
  cross_entropy_forward(rows, V, x.data(), t.data(), opt, loss.data(), nullptr, lse.data());
  cross_entropy_backward(rows, V, x.data(), t.data(), lse.data(), g.data(), opt, dx.data());
  auto f = [&] {
    cross_entropy_forward(rows, V, x.data(), t.data(), opt, loss.data(), nullptr, nullptr);
    return testing::dot(loss, g);
  };
  testing::check_grad_fd(x, dx, f, 148, 1e-2, 2e-2, 1e-3, "dlogits");
  // Rows of dlogits sum to dloss * 2 z lse (softmax and soft targets both sum to 1).
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t v = 0; v < V; ++v) s += dx[r * V + v];
    EXPECT_NEAR(s, g[r] * 2 * opt.z_loss * lse[r], 1e-5);
  }
}

TEST(CrossEntropy, InPlaceBackwardAndRecomputedLse) {
  int64_t rows = 3, V = 50;
  auto x = random_vec(rows * V, 21, -3, 3);
  auto t = random_targets(rows, V, 22);
  std::vector<float> g(rows, 1.f), dx(x.size()), lse(rows), loss(rows);
  CrossEntropyOptions opt{1e-4f, 0.f};
  cross_entropy_forward(rows, V, x.data(), t.data(), opt, loss.data(), nullptr, lse.data());
  cross_entropy_backward(rows, V, x.data(), t.data(), lse.data(), g.data(), opt, dx.data());
  cross_entropy_backward(rows, V, x.data(), t.data(), nullptr, g.data(), opt, x.data());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], dx[i], 1e-7);
}

TEST(CrossEntropy, RejectsMisuse) {
  std::vector<float> x(6), loss(2);
  std::vector<int32_t> t{0, 3};
  try {
    cross_entropy_forward(2, 3, x.data(), t.data(), {}, loss.data(), nullptr, nullptr);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("row 1"), std::string::npos) << e.what();
  }
  t[1] = 0;
  EXPECT_THROW(cross_entropy_forward(2, 3, x.data(), t.data(), {0.f, 1.f}, loss.data(), nullptr,
                                     nullptr),
               std::invalid_argument);
}

}  // namespace
}  // namespace t5x::cpu

// The device seam (ops/primitive.h): apply() picks eval_cpu() or eval_cuda()
// from the inputs' Device, refuses mixed devices, and a primitive without a
// CUDA kernel names itself. This build has no CUDA backend (backend/no_cuda),
// so the arrays "on cuda:0" below are host buffers relabelled through
// impl(): only the dispatch is under test, no kernel reads them.
#include <stdexcept>
#include <string>

#include "backend/device.h"
#include "harness.h"
#include "ops/primitive.h"

namespace t5x {
namespace {
using namespace testing;

Array on_cuda(const Array& x) {
  Array c = x.alias();
  c.impl().device = Device{DeviceKind::cuda, 0};
  return c;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

// Returns 1 from its CPU eval and 2 from its CUDA eval.
class WhichDevice : public Primitive {
 public:
  const char* name() const override { return "which_device"; }
  std::vector<Array> eval_cpu(const std::vector<Array>&) override { return {Array::scalar(1.0)}; }
  std::vector<Array> eval_cuda(const std::vector<Array>&) override { return {Array::scalar(2.0)}; }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>&,
                         const std::vector<bool>&) override {
    return {Array()};
  }
};

TEST(DeviceSeam, NoCudaBackendInThisBuild) { EXPECT_FALSE(backend::cuda_available()); }

TEST(DeviceSeam, ApplyPicksTheEvalOfTheInputsDevice) {
  Array x = Array::from_floats(Shape{{"embed", 3}}, {1, 2, 3});
  EXPECT_EQ(apply1(std::make_shared<WhichDevice>(), {x}).item(), 1.0);
  EXPECT_EQ(apply1(std::make_shared<WhichDevice>(), {on_cuda(x)}).item(), 2.0);
  EXPECT_EQ(apply1(std::make_shared<WhichDevice>(), {Array(), on_cuda(x)}).item(), 2.0);  // null inputs skipped
  EXPECT_EQ(apply1(std::make_shared<WhichDevice>(), {}).item(), 1.0);  // no inputs: the CPU
}

TEST(DeviceSeam, PrimitiveWithoutCudaKernelIsNamed) {
  Array x = on_cuda(Array::from_floats(Shape{{"embed", 3}}, {1, 2, 3}));
  EXPECT_EQ(error_of([&] { exp(x); }),
            "[exp] has no CUDA kernel in this build (inputs on cuda:0); this build has no CUDA backend");
  EXPECT_EQ(error_of([&] { sum(x, {"embed"}); }).rfind("[sum] has no CUDA kernel in this build (inputs on cuda:0)", 0),
            0u);
  // Composites expand on any device; those that call a CPU kernel themselves refuse.
  EXPECT_EQ(error_of([&] { isnan(x); }),
            "[isnan] has no CUDA kernel in this build (inputs on cuda:0); this build has no CUDA backend");
  EXPECT_EQ(error_of([&] { argmax(x, "embed"); }).rfind("[argmax] has no CUDA kernel", 0), 0u);
  Array ids = on_cuda(Array::from_ints(Shape{{"batch", 2}}, {0, 1}));
  EXPECT_EQ(error_of([&] { one_hot(ids, 3, "vocab"); }).rfind("[one_hot] has no CUDA kernel", 0), 0u);
}

TEST(DeviceSeam, MixedDevicesAreRefused) {
  Array x = Array::from_floats(Shape{{"embed", 3}}, {1, 2, 3});
  Array y = on_cuda(Array::from_floats(Shape{{"embed", 3}}, {4, 5, 6}));
  EXPECT_EQ(error_of([&] { add(x, y); }),
            "[add] inputs on different devices: cpu:0 and cuda:0; copy them to one device first");
  Array y1 = y.alias();
  y1.impl().device.index = 1;
  EXPECT_EQ(error_of([&] { mul(y, y1); }),
            "[mul] inputs on different devices: cuda:0 and cuda:1; copy them to one device first");
}

TEST(DeviceSeam, BuffersComeFromTheirDevicesAllocator) {
  Array x = Array::from_floats(Shape{{"embed", 3}}, {1, 2, 3});
  EXPECT_EQ(x.impl().buffer->device(), Device{});
  EXPECT_EQ(error_of([] { Array(Shape{{"embed", 3}}, DType::f32, {}, Device{DeviceKind::cuda, 0}); }),
            "[Buffer] cannot allocate on a CUDA device: this build has no CUDA backend");
  // A host array is its own host copy; host reads go through to_host().
  EXPECT_TRUE(x.to_host().same_buffer(x));
  EXPECT_EQ(x.to_floats(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(Array::scalar(7, DType::i32).item(), 7.0);
}

}  // namespace
}  // namespace t5x

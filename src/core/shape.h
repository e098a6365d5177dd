// Named shapes (Mesh-TensorFlow style): an ordered list of Dim{name, size}.
//
// Every dimension carries a logical axis name ("batch", "length", "embed",
// "heads", "kv", "mlp", "vocab", ...). Names are unique within a shape.
// Printed as "[batch=8, length=128, embed=512]"; a scalar prints as "[]".
// Layout of the data is row-major over the listed order (last dim fastest).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace t5x {

struct Dim {
  std::string name;
  int64_t size = 0;
  bool operator==(const Dim&) const = default;
};

class Shape {
 public:
  Shape() = default;
  // Throws std::invalid_argument("[Shape] ...") on duplicate names, empty
  // names or negative sizes.
  Shape(std::initializer_list<Dim> dims);
  explicit Shape(std::vector<Dim> dims);

  int rank() const { return int(dims_.size()); }
  int64_t numel() const;  // product of sizes (1 for a scalar)
  const std::vector<Dim>& dims() const { return dims_; }
  const Dim& operator[](int i) const { return dims_[size_t(i)]; }
  // Position of `name`, or -1.
  int index(const std::string& name) const;
  bool has(const std::string& name) const { return index(name) >= 0; }
  // Size of dim `name`; throws "[Shape] no dim 'x' in [..]" if absent.
  int64_t size(const std::string& name) const;
  std::vector<std::string> names() const;
  std::vector<int64_t> sizes() const;
  // Row-major element strides, one per dim.
  std::vector<int64_t> strides() const;
  std::string to_string() const;

  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return !(*this == o); }

 private:
  void validate() const;
  std::vector<Dim> dims_;
};

// "[a, b, c]" for a list of names.
std::string names_to_string(const std::vector<std::string>& names);

}  // namespace t5x

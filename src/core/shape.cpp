#include "core/shape.h"

#include "core/error.h"

namespace t5x {

Shape::Shape(std::initializer_list<Dim> dims) : dims_(dims) { validate(); }
Shape::Shape(std::vector<Dim> dims) : dims_(std::move(dims)) { validate(); }

void Shape::validate() const {
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (dims_[i].name.empty()) throw_invalid("Shape", "dim " + std::to_string(i) + " has an empty name");
    if (dims_[i].size < 0)
      throw_invalid("Shape", "dim '" + dims_[i].name + "' has negative size " + std::to_string(dims_[i].size));
    for (size_t j = 0; j < i; ++j)
      if (dims_[j].name == dims_[i].name)
        throw_invalid("Shape", "duplicate dim name '" + dims_[i].name + "' in " + to_string());
  }
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (const Dim& d : dims_) n *= d.size;
  return n;
}

int Shape::index(const std::string& name) const {
  for (size_t i = 0; i < dims_.size(); ++i)
    if (dims_[i].name == name) return int(i);
  return -1;
}

int64_t Shape::size(const std::string& name) const {
  int i = index(name);
  if (i < 0) throw_invalid("Shape", "no dim '" + name + "' in " + to_string());
  return dims_[size_t(i)].size;
}

std::vector<std::string> Shape::names() const {
  std::vector<std::string> r;
  for (const Dim& d : dims_) r.push_back(d.name);
  return r;
}

std::vector<int64_t> Shape::sizes() const {
  std::vector<int64_t> r;
  for (const Dim& d : dims_) r.push_back(d.size);
  return r;
}

std::vector<int64_t> Shape::strides() const {
  std::vector<int64_t> s(dims_.size());
  int64_t acc = 1;
  for (int i = int(dims_.size()) - 1; i >= 0; --i) {
    s[size_t(i)] = acc;
    acc *= dims_[size_t(i)].size;
  }
  return s;
}

std::string Shape::to_string() const {
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ", ";
    s += dims_[i].name + "=" + std::to_string(dims_[i].size);
  }
  return s + "]";
}

std::string names_to_string(const std::vector<std::string>& names) {
  std::string s = "[";
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
  return s + "]";
}

}  // namespace t5x

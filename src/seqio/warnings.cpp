#include "seqio/warnings.h"

#include <iostream>
#include <mutex>
#include <set>

namespace seqio {
namespace {

std::mutex mu;
std::set<std::string> seen;
WarningSink sink;

}  // namespace

void warn_once(const std::string& text) {
  std::lock_guard<std::mutex> lock(mu);
  if (!seen.insert(text).second) return;
  if (sink) sink(text);
  else std::cerr << ("seqio warning: " + text + "\n") << std::flush;
}

WarningSink set_warning_sink(WarningSink s) {
  std::lock_guard<std::mutex> lock(mu);
  std::swap(sink, s);
  return s;
}

void reset_warnings() {
  std::lock_guard<std::mutex> lock(mu);
  seen.clear();
}

}  // namespace seqio

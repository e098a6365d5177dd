// gin text (--gin_file contents, --gin.X=... bindings) through the parser the
// CLI uses, with the t5x registry; then every binding's macros are resolved
// and the operative config must parse back to the same config.
#include <cstdlib>

#include "fuzz_util.h"
#include "t5x/gin/config.h"

using t5x::gin::Config;
using t5x::gin::GinError;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Config cfg;
  try {
    cfg.parse_string(t5x_fuzz::as_text(data, size), "<fuzz>");
  } catch (const GinError&) {
    return 0;
  }
  (void)cfg.missing_macros();
  for (const auto& b : cfg.bindings()) {
    try {
      (void)cfg.resolve(b.value);
    } catch (const GinError&) {
    }
  }
  Config again;
  again.parse_string(cfg.operative_config_str(), "<operative>");
  if (!again.equivalent(cfg)) std::abort();
  return 0;
}

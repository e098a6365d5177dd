// Warnings of the data pipeline (where seqio / T5 call absl's
// logging.warning): each distinct text goes once per process to the sink,
// by default stderr as "seqio warning: <text>".
#pragma once
#include <functional>
#include <string>

namespace seqio {

using WarningSink = std::function<void(const std::string& text)>;

void warn_once(const std::string& text);
// Replaces the sink (nullptr: stderr) and returns the previous one; tests
// capture warnings this way. Not thread-safe against concurrent warn_once.
WarningSink set_warning_sink(WarningSink sink);
// Forgets the texts already warned about (tests).
void reset_warnings();

}  // namespace seqio

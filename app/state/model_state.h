// The model mode's state shared by the command line and the window (see docs/model.md).
#pragma once

#include <string>

namespace app {

// Where the model is found when no --model-dir is given: $ATTNSCOPE_MODEL_DIR when set, else
// <exe dir>/../models/all-MiniLM-L6-v2 (build/bin/attnscope → build/models/, where scripts/setup.sh puts it).
std::string defaultModelDirectory();

} // namespace app

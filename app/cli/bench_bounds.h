// The machine's bounds that every speed figure is reported against (`attnscope bench`, `attnscope model --bench`).
#pragma once

namespace app {

struct Bounds {
    double sgemmGflops = 0;  // a large square Eigen product per core, all cores at once
    double memGBs = 0;       // a streaming read + write over buffers far larger than the caches
};

// Measures both (about a second).
Bounds measureBounds();

// Peak resident memory of this process so far, in MB (getrusage).
double peakRssMb();

} // namespace app

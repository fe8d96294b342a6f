// What the CUDA tests' main() has in common (tests/parity: built against a GPU, label gpu, and over the emulated
// runtime, label unit): listing the tests (CTest's discovery) works on every machine; running them needs a usable
// device (or the emulator's), and without one the program says why and exits 77, CTest's SKIP_RETURN_CODE.
#pragma once

#include "cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace attn::test {

inline constexpr int kSkipped = 77;  // CTest SKIP_RETURN_CODE

// After ::testing::InitGoogleTest: true to run the tests; false (with `needs` and the reason printed) when they
// cannot run here. With `printDevice`, prints the device used.
inline bool deviceForTests(const char* needs, bool printDevice = true)
{
    if (GTEST_FLAG_GET(list_tests)) return true;
    std::string why;
    if (!attn::cuda::deviceAvailable(&why)) {
        std::printf("SKIPPED (%s): no usable GPU: %s\n", needs, why.c_str());
        return false;
    }
    if (printDevice) std::printf("device: %s\n", why.c_str());
    return true;
}

} // namespace attn::test

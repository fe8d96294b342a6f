// Golden tests: sessions and float64 results written by numpy_reference.py (an independent NumPy
// implementation), computed here through the session parser on both CPU paths and compared.
// Usage: test_golden CASES_DIR   (exit code carries the verdict: 0 all passed, 1 any failed)
#include <attnscope/attention.h>
#include <attnscope/preset_io.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// float32 computation vs float64 NumPy on O(1) values with ≤ 8-term sums: errors are a few ulp (~1e-6
// relative). 1e-5 abs + 1e-4 rel is far below any real bug (wrong mask/axis/head changes values by > 1e-2).
constexpr double kAtol = 1e-5, kRtol = 1e-4;

struct Compare {
    int mismatches = 0;
    double maxDiff = 0;
    std::string first;
};

// Compares entry by entry; entries where `skip` is true (masked scores) are not compared.
void compare(const attn::Matrix& got, const json& want, const std::string& what, Compare& c,
             const attn::MaskMatrix* skip = nullptr)
{
    if (got.rows() != static_cast<long>(want.size()) || (want.size() && got.cols() != static_cast<long>(want[0].size()))) {
        ++c.mismatches;
        c.first += "\n    " + what + ": shape " + std::to_string(got.rows()) + "×" + std::to_string(got.cols()) +
                   " differs from NumPy's";
        return;
    }
    for (long i = 0; i < got.rows(); ++i)
        for (long j = 0; j < got.cols(); ++j) {
            if (skip && (*skip)(i, j)) continue;
            const double e = want[i][j].get<double>(), a = got(i, j);
            const double d = std::fabs(a - e);
            c.maxDiff = std::max(c.maxDiff, d);
            if (!(d <= kAtol + kRtol * std::fabs(e))) {
                if (c.mismatches < 5)
                    c.first += "\n    " + what + "[" + std::to_string(i) + "][" + std::to_string(j) + "]: got " +
                               std::to_string(a) + ", NumPy " + std::to_string(e);
                ++c.mismatches;
            }
        }
}

bool runCase(const fs::path& file, attn::CpuPath path)
{
    const char* pathName = path == attn::CpuPath::Reference ? "reference" : "eigen";
    const std::string name = file.stem().string();
    auto text = attn::readFile(file.string(), 64 << 20);
    if (!text) {
        std::printf("FAIL %s: %s\n", name.c_str(), text.status().message.c_str());
        return false;
    }
    const json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) {
        std::printf("FAIL %s: not valid JSON\n", name.c_str());
        return false;
    }
    if (doc.value("format", "") != "attnscope-golden" || doc.value("version", 0) != 1) {
        std::printf("FAIL %s: not an attnscope-golden version 1 file\n", name.c_str());
        return false;
    }
    auto session = attn::parseSession(doc["session"].dump(), name);
    if (!session) {
        std::printf("FAIL %s: %s\n", name.c_str(), session.status().message.c_str());
        return false;
    }
    attn::AttentionConfig cfg = session->config;
    cfg.cpuPath = path;
    auto r = attn::compute(session->input, cfg);
    if (!r) {
        std::printf("FAIL %s (%s): %s\n", name.c_str(), pathName, r.status().message.c_str());
        return false;
    }
    const json& want = doc["expected"];
    Compare c;
    if (r->heads.size() != want["heads"].size()) {
        std::printf("FAIL %s: %zu heads, NumPy has %zu\n", name.c_str(), r->heads.size(), want["heads"].size());
        return false;
    }
    for (std::size_t h = 0; h < r->heads.size(); ++h) {
        const attn::HeadResult& hr = r->heads[h];
        const json& w = want["heads"][h];
        const std::string hs = "head" + std::to_string(h) + ".";
        compare(hr.scores, w["scores"], hs + "scores", c);
        compare(hr.masked.cast<float>(), w["masked"], hs + "masked", c);
        compare(hr.weights, w["weights"], hs + "weights", c);
        compare(hr.output, w["output"], hs + "output", c);
        const std::vector<int> fully = want["fully_masked"][h].get<std::vector<int>>();
        if (hr.fullyMaskedQueries != fully) {
            ++c.mismatches;
            c.first += "\n    " + hs + "fully masked queries differ from NumPy's";
        }
    }
    compare(r->concat, want["concat"], "concat", c);
    compare(r->output, want["output"], "output", c);
    std::printf("%s %-32s %-9s max |diff| %.3g%s\n", c.mismatches ? "FAIL" : "ok  ", name.c_str(), pathName, c.maxDiff,
                c.mismatches ? (" (" + std::to_string(c.mismatches) + " mismatches)" + c.first).c_str() : "");
    return c.mismatches == 0;
}

} // namespace

int main(int argc, char** argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: test_golden CASES_DIR\n");
        return 2;
    }
    std::vector<fs::path> files;
    std::error_code ec;
    for (auto& e : fs::directory_iterator(argv[1], ec))
        if (e.path().extension() == ".json") files.push_back(e.path());
    if (ec || files.empty()) {
        std::fprintf(stderr, "test_golden: no golden cases in %s (run numpy_reference.py first)\n", argv[1]);
        return 1;
    }
    std::sort(files.begin(), files.end());
    int passed = 0, failed = 0;
    for (const fs::path& f : files)
        for (attn::CpuPath p : {attn::CpuPath::Reference, attn::CpuPath::Fast}) {
            bool ok = false;
            try {
                ok = runCase(f, p);
            } catch (const json::exception& e) {  // a malformed expected section: report, do not abort
                std::printf("FAIL %s: %s\n", f.stem().string().c_str(), e.what());
            }
            (ok ? passed : failed)++;
        }
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}

// CUDA-OpenGL interop (attnscope/device_interop.h, core/cuda/gl_interop.cpp) over the emulated CUDA runtime
// (label unit): compute on the emulated device, fill fake GL textures from the device buffers, and check that
// every texel equals the host result, per head, for scores, weights and output in both layouts; that a stale
// result, an unregistered texture, a wrong size and a CUDA failure are refused with a clear Status. What it
// cannot check: the real driver's mapping and GL's view of the texels (test_gl_interop, label gpu, does).
#include "emulated/fake_gl_interop.h"
#include "test_util.h"

#include <attnscope/attention.h>
#include <attnscope/device_interop.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

namespace emu {
extern std::size_t deviceBytes;  // fake_cuda_runtime.cpp
}

namespace attn {
namespace {

const Matrix& hostMatrix(const AttentionResult& r, DeviceMatrix which, int h)
{
    const HeadResult& hr = r.heads[static_cast<std::size_t>(h)];
    return which == DeviceMatrix::Scores ? hr.scores : which == DeviceMatrix::Weights ? hr.weights : hr.output;
}

// Bitwise equality of a texture with a row-major matrix (texture row r = matrix row r); both come from the
// same device buffer, so not a single bit may differ. Names the first differing texel.
::testing::AssertionResult sameTexels(unsigned id, const Matrix& m, const std::string& what)
{
    const emu::FakeTexture* t = emu::texture(id);
    if (!t) return ::testing::AssertionFailure() << what << ": texture " << id << " does not exist";
    if (t->width != m.cols() || t->height != m.rows())
        return ::testing::AssertionFailure() << what << ": texture " << t->width << "×" << t->height << ", expected "
                                             << m.cols() << "×" << m.rows();
    for (Eigen::Index r = 0; r < m.rows(); ++r)
        for (Eigen::Index c = 0; c < m.cols(); ++c) {
            const float got = t->texels[std::size_t(r * m.cols() + c)], want = m(r, c);
            if (std::memcmp(&got, &want, sizeof got) != 0)
                return ::testing::AssertionFailure() << what << ": texel (row " << r << ", col " << c << ") is " << got
                                                     << ", the host result has " << want;
        }
    return ::testing::AssertionSuccess();
}

Expected<AttentionResult> computeOnDevice(const test::ProblemSpec& p)
{
    AttentionInput in;
    AttentionConfig cfg;
    test::makeProblem(p, in, cfg);
    if (p.layout == Layout::Column) {
        in = test::transposed(in);
        cfg.layout = Layout::Column;
    }
    cfg.backend = Backend::Cuda;
    return compute(in, cfg);
}

// A registered fake texture of the host matrix's size, unregistered and deleted at the end of the scope.
struct Texture {
    Texture(unsigned id, Eigen::Index cols, Eigen::Index rows, bool float32 = true) : id(id)
    {
        emu::createTexture(id, unsigned(cols), unsigned(rows), float32);
        status = registerGlTexture(id);
    }
    ~Texture()
    {
        EXPECT_TRUE(unregisterGlTexture(id).ok());
        emu::deleteTexture(id);
    }
    unsigned id;
    Status status;
};

struct Case {
    Layout layout;
    int heads;
    bool wo;
};

class GlInterop : public ::testing::TestWithParam<Case> {};

test::ProblemSpec specOf(const Case& c)
{
    test::ProblemSpec p;
    p.layout = c.layout;
    p.heads = c.heads;
    p.wo = c.wo;
    p.mode = Mode::Cross;  // so that S can differ from T
    p.T = 5;               // T ≠ S ≠ d_v: a transposed or mis-strided copy cannot match by accident
    p.S = 7;
    p.dv = 3;
    p.causal = true;
    return p;
}

TEST_P(GlInterop, EveryHeadsMatricesReachTheTextureUnchanged)
{
    const Case c = GetParam();
    Expected<AttentionResult> r = computeOnDevice(specOf(c));
    ASSERT_TRUE(r.ok()) << r.status().message;
    ASSERT_EQ(r->backend, Backend::Cuda);
    ASSERT_NE(r->deviceGeneration, 0u);
    EXPECT_TRUE(deviceResultCurrent(r->deviceGeneration));
    for (int h = 0; h < c.heads; ++h)
        for (DeviceMatrix which : {DeviceMatrix::Scores, DeviceMatrix::Weights, DeviceMatrix::Output}) {
            const std::string what = std::string("head ") + std::to_string(h) + " " + toString(which);
            const Matrix& m = hostMatrix(*r, which, h);
            Texture tex(10 + unsigned(h), m.cols(), m.rows());
            ASSERT_TRUE(tex.status.ok()) << tex.status.message;
            const int copiesBefore = emu::copiesToArrays;
            const Status s = fillGlTexture(tex.id, r->deviceGeneration, which, h);
            ASSERT_TRUE(s.ok()) << what << ": " << s.message;
            EXPECT_EQ(emu::copiesToArrays, copiesBefore + 1) << what << ": one 2D copy per fill";
            EXPECT_EQ(emu::lastCopyKind, cudaMemcpyDeviceToDevice) << what << ": the texels must come from device memory";
            EXPECT_FALSE(emu::texture(tex.id)->mapped) << what << ": the texture must be unmapped for GL afterwards";
            EXPECT_TRUE(sameTexels(tex.id, m, what));
        }
}

INSTANTIATE_TEST_SUITE_P(Layouts, GlInterop,
                         ::testing::Values(Case{Layout::Row, 1, false}, Case{Layout::Row, 3, true},
                                           Case{Layout::Column, 1, false}, Case{Layout::Column, 3, true}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                             return std::string(toString(i.param.layout)) + "_" + std::to_string(i.param.heads) + "heads" +
                                    (i.param.wo ? "_wo" : "");
                         });

test::ProblemSpec twoHeads()
{
    test::ProblemSpec p;
    p.heads = 2;
    return p;
}

// Two heads of 4 queries × 6 keys (cross): maps of 6×4 (cols × rows), not square.
test::ProblemSpec fourQueriesSixKeys()
{
    test::ProblemSpec p = twoHeads();
    p.mode = Mode::Cross;
    p.T = 4;
    p.S = 6;
    return p;
}

TEST(GlInteropErrors, AStaleResultIsRefusedAndTheTextureKeepsItsTexels)
{
    Expected<AttentionResult> first = computeOnDevice(twoHeads());
    ASSERT_TRUE(first.ok()) << first.status().message;
    const Matrix& m = first->heads[0].weights;
    Texture tex(20, m.cols(), m.rows());
    ASSERT_TRUE(tex.status.ok()) << tex.status.message;
    ASSERT_TRUE(fillGlTexture(tex.id, first->deviceGeneration, DeviceMatrix::Weights, 0).ok());

    test::ProblemSpec p = twoHeads();
    p.seed = 2;
    Expected<AttentionResult> second = computeOnDevice(p);
    ASSERT_TRUE(second.ok()) << second.status().message;
    EXPECT_GT(second->deviceGeneration, first->deviceGeneration);
    EXPECT_FALSE(deviceResultCurrent(first->deviceGeneration));
    EXPECT_TRUE(deviceResultCurrent(second->deviceGeneration));
    const Status s = fillGlTexture(tex.id, first->deviceGeneration, DeviceMatrix::Weights, 0);
    EXPECT_EQ(s.code, StatusCode::Unavailable);
    EXPECT_EQ(s.message, "fillGlTexture: the device no longer holds result generation " +
                             std::to_string(first->deviceGeneration) + " (it holds generation " +
                             std::to_string(second->deviceGeneration) + "); upload its host matrices instead");
    EXPECT_TRUE(sameTexels(tex.id, m, "after the refused fill")) << "a refused fill must not write";
}

TEST(GlInteropErrors, AFailedComputeLeavesNoResultOnTheDevice)
{
    Expected<AttentionResult> good = computeOnDevice(twoHeads());
    ASSERT_TRUE(good.ok()) << good.status().message;
    const std::size_t saved = emu::deviceBytes;
    // The next compute does not fit (64 KiB of scores and weights; the workspace holds a few KiB): it fails
    // before writing anything, but it has started, and the buffers are no longer promised to anyone.
    emu::deviceBytes = 1024;
    test::ProblemSpec big = twoHeads();
    big.T = big.S = 64;
    Expected<AttentionResult> bad = computeOnDevice(big);
    emu::deviceBytes = saved;
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code, StatusCode::ResourceExhausted) << bad.status().message;
    EXPECT_FALSE(deviceResultCurrent(good->deviceGeneration));
    Texture tex(21, good->heads[0].scores.cols(), good->heads[0].scores.rows());
    const Status s = fillGlTexture(tex.id, good->deviceGeneration, DeviceMatrix::Scores, 0);
    EXPECT_EQ(s.code, StatusCode::Unavailable);
    EXPECT_NE(s.message.find("(a later compute replaced it)"), std::string::npos) << s.message;
}

TEST(GlInteropErrors, ACpuResultHasNoDeviceGeneration)
{
    AttentionInput in;
    AttentionConfig cfg;
    test::makeProblem(twoHeads(), in, cfg);
    cfg.backend = Backend::Cpu;
    Expected<AttentionResult> r = compute(in, cfg);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->deviceGeneration, 0u);
    EXPECT_FALSE(deviceResultCurrent(0));
    Texture tex(22, r->heads[0].scores.cols(), r->heads[0].scores.rows());
    const Status s = fillGlTexture(tex.id, 0, DeviceMatrix::Scores, 0);
    EXPECT_EQ(s.code, StatusCode::Unavailable);
    EXPECT_EQ(s.message, "fillGlTexture: the result was not computed on the device (deviceGeneration 0); upload its "
                         "host matrices instead");
}

TEST(GlInteropErrors, AnUnregisteredTextureIsRefused)
{
    Expected<AttentionResult> r = computeOnDevice(twoHeads());
    ASSERT_TRUE(r.ok()) << r.status().message;
    const Matrix& m = r->heads[1].scores;
    emu::createTexture(23, unsigned(m.cols()), unsigned(m.rows()));
    const std::string expected =
        "fillGlTexture: GL texture 23 is not registered for device writes (call registerGlTexture first)";
    Status s = fillGlTexture(23, r->deviceGeneration, DeviceMatrix::Scores, 1);
    EXPECT_EQ(s.code, StatusCode::InvalidArgument);
    EXPECT_EQ(s.message, expected);
    // Registered, then unregistered: refused the same way.
    ASSERT_TRUE(registerGlTexture(23).ok());
    ASSERT_TRUE(unregisterGlTexture(23).ok());
    EXPECT_EQ(emu::texture(23)->registrations, 0);
    s = fillGlTexture(23, r->deviceGeneration, DeviceMatrix::Scores, 1);
    EXPECT_EQ(s.code, StatusCode::InvalidArgument);
    EXPECT_EQ(s.message, expected);
    emu::deleteTexture(23);
}

TEST(GlInteropErrors, RegistrationIsCheckedAndReplacedNotDoubled)
{
    Status s = registerGlTexture(0);
    EXPECT_EQ(s.code, StatusCode::InvalidArgument);
    EXPECT_EQ(s.message, "registerGlTexture: texture 0 is not a GL texture");
    // No such GL texture: the runtime's error, naming the call.
    s = registerGlTexture(999);
    EXPECT_EQ(s.code, StatusCode::Internal);
    EXPECT_NE(s.message.find("in cudaGraphicsGLRegisterImage("), std::string::npos) << s.message;
    // Registering again (after respecifying the storage) replaces the registration.
    emu::createTexture(24, 4, 4);
    ASSERT_TRUE(registerGlTexture(24).ok());
    ASSERT_TRUE(registerGlTexture(24).ok());
    EXPECT_EQ(emu::texture(24)->registrations, 1);
    EXPECT_TRUE(unregisterGlTexture(24).ok());
    EXPECT_EQ(emu::texture(24)->registrations, 0);
    EXPECT_TRUE(unregisterGlTexture(24).ok()) << "unregistering an unknown texture is a no-op";
    emu::deleteTexture(24);
}

TEST(GlInteropErrors, WrongSizeFormatOrHeadIsRefusedNamingExpectedAndActual)
{
    Expected<AttentionResult> r = computeOnDevice(fourQueriesSixKeys());
    ASSERT_TRUE(r.ok()) << r.status().message;
    {
        Texture tex(25, 4, 6);  // transposed: 4×6 instead of 6×4 (cols × rows)
        const Status s = fillGlTexture(tex.id, r->deviceGeneration, DeviceMatrix::Weights, 1);
        EXPECT_EQ(s.code, StatusCode::InvalidArgument);
        EXPECT_EQ(s.message, "fillGlTexture: texture 25 for head 1 weights: expected 6×4 (cols × rows) single-channel "
                             "32-bit float texels, got 4×6");
        EXPECT_FALSE(emu::texture(tex.id)->mapped) << "unmapped on the error path too";
    }
    {
        Texture tex(26, 6, 4, /*float32=*/false);
        const Status s = fillGlTexture(tex.id, r->deviceGeneration, DeviceMatrix::Scores, 0);
        EXPECT_EQ(s.code, StatusCode::InvalidArgument);
        EXPECT_NE(s.message.find("got 6×4 of another format"), std::string::npos) << s.message;
    }
    {
        Texture tex(27, 6, 4);
        const Status s = fillGlTexture(tex.id, r->deviceGeneration, DeviceMatrix::Scores, 2);
        EXPECT_EQ(s.code, StatusCode::InvalidArgument);
        EXPECT_EQ(s.message, "fillGlTexture: head: expected 0…1, got 2");
    }
}

TEST(GlInteropErrors, ACudaFailureIsAStatusAndTheNextFillWorks)
{
    Expected<AttentionResult> r = computeOnDevice(twoHeads());
    ASSERT_TRUE(r.ok()) << r.status().message;
    const Matrix& m = r->heads[0].scores;
    Texture tex(28, m.cols(), m.rows());
    emu::failNextMap = cudaErrorUnknown;
    Status s = fillGlTexture(tex.id, r->deviceGeneration, DeviceMatrix::Scores, 0);
    EXPECT_EQ(s.code, StatusCode::Internal);
    EXPECT_NE(s.message.find("in cudaGraphicsMapResources(count, resources, stream) at core/cuda/gl_interop.cpp:"), std::string::npos)
        << s.message;
    s = fillGlTexture(tex.id, r->deviceGeneration, DeviceMatrix::Scores, 0);
    ASSERT_TRUE(s.ok()) << s.message;
    EXPECT_TRUE(sameTexels(tex.id, m, "after a failed map"));
}

// The window's tiles: textures smaller than the matrix, each filled with its part (row0, col0), a batch mapped in
// one call. Every texel is checked against the host matrix's cell it stands for.
::testing::AssertionResult samePart(unsigned id, const Matrix& m, int row0, int col0, const std::string& what)
{
    const emu::FakeTexture* t = emu::texture(id);
    if (!t) return ::testing::AssertionFailure() << what << ": texture " << id << " does not exist";
    for (unsigned r = 0; r < t->height; ++r)
        for (unsigned c = 0; c < t->width; ++c) {
            const float got = t->texels[std::size_t(r) * t->width + c], want = m(row0 + Eigen::Index(r), col0 + Eigen::Index(c));
            if (std::memcmp(&got, &want, sizeof got) != 0)
                return ::testing::AssertionFailure() << what << ": texel (row " << r << ", col " << c << ") is " << got
                                                     << ", the host result's cell (" << row0 + int(r) << ", " << col0 + int(c)
                                                     << ") has " << want;
        }
    return ::testing::AssertionSuccess();
}

TEST_P(GlInterop, TilesOfEveryMatrixTakeTheirPartsInOneMappedBatch)
{
    const Case c = GetParam();
    Expected<AttentionResult> r = computeOnDevice(specOf(c));
    ASSERT_TRUE(r.ok()) << r.status().message;
    // Tiles of side 2 (edge tiles narrower), as GlHeatmapRenderer lays them out: every cell of every matrix of every
    // head in one batch.
    constexpr int kSide = 2;
    struct Placed {
        GlTextureFill fill;
        const Matrix* m;
    };
    std::vector<Placed> placed;
    std::vector<GlTextureFill> fills;
    unsigned id = 100;
    for (int h = 0; h < c.heads; ++h)
        for (DeviceMatrix which : {DeviceMatrix::Scores, DeviceMatrix::Weights, DeviceMatrix::Output}) {
            const Matrix& m = hostMatrix(*r, which, h);
            for (int r0 = 0; r0 < m.rows(); r0 += kSide)
                for (int c0 = 0; c0 < m.cols(); c0 += kSide) {
                    const unsigned w = unsigned(std::min<Eigen::Index>(kSide, m.cols() - c0));
                    const unsigned hgt = unsigned(std::min<Eigen::Index>(kSide, m.rows() - r0));
                    emu::createTexture(id, w, hgt);
                    ASSERT_TRUE(registerGlTexture(id).ok());
                    const GlTextureFill f{id++, which, h, r0, c0};
                    placed.push_back({f, &m});
                    fills.push_back(f);
                }
        }
    const int mapsBefore = emu::mapCalls, copiesBefore = emu::copiesToArrays;
    const Status s = fillGlTextures(r->deviceGeneration, fills);
    ASSERT_TRUE(s.ok()) << s.message;
    EXPECT_EQ(emu::mapCalls, mapsBefore + 1) << "the batch is mapped in one call";
    EXPECT_EQ(emu::copiesToArrays, copiesBefore + int(fills.size())) << "one 2D copy per texture";
    EXPECT_EQ(emu::lastCopyKind, cudaMemcpyDeviceToDevice);
    for (const Placed& pl : placed) {
        const std::string what = std::string("head ") + std::to_string(pl.fill.head) + " " + toString(pl.fill.which) + " from (" +
                                 std::to_string(pl.fill.row0) + ", " + std::to_string(pl.fill.col0) + ")";
        EXPECT_FALSE(emu::texture(pl.fill.texture)->mapped) << what;
        EXPECT_TRUE(samePart(pl.fill.texture, *pl.m, pl.fill.row0, pl.fill.col0, what));
        EXPECT_TRUE(unregisterGlTexture(pl.fill.texture).ok());
        emu::deleteTexture(pl.fill.texture);
    }
}

TEST(GlInteropErrors, ABatchWithABadPartWritesNothingAndSaysWhichPart)
{
    Expected<AttentionResult> r = computeOnDevice(fourQueriesSixKeys());
    ASSERT_TRUE(r.ok()) << r.status().message;
    EXPECT_TRUE(fillGlTextures(r->deviceGeneration, {}).ok()) << "an empty batch";
    Texture good(30, 3, 2), bad(31, 3, 2);
    ASSERT_TRUE(good.status.ok() && bad.status.ok());
    const auto untouched = [](unsigned id) {
        for (float v : emu::texture(id)->texels)
            if (v == v) return false;  // written (the fake's texels are NaN until a copy)
        return !emu::texture(id)->mapped;
    };
    // The second part's 3 columns from column 4 reach past the 6 columns of the weights (cols × rows: 6×4).
    Status s = fillGlTextures(r->deviceGeneration, {{30, DeviceMatrix::Weights, 1, 0, 0}, {31, DeviceMatrix::Weights, 1, 2, 4}});
    EXPECT_EQ(s.code, StatusCode::InvalidArgument);
    EXPECT_EQ(s.message, "fillGlTextures: texture 31 for head 1 weights: its 3×2 texels (cols × rows) from (row 2, col 4) "
                         "reach past the 6×4 matrix");
    EXPECT_TRUE(untouched(30)) << "a refused batch writes none of its textures, and leaves them unmapped";
    EXPECT_TRUE(untouched(31));
    s = fillGlTextures(r->deviceGeneration, {{30, DeviceMatrix::Scores, 0, 3, 0}});  // rows 3…4 of 4
    EXPECT_EQ(s.code, StatusCode::InvalidArgument);
    EXPECT_NE(s.message.find("from (row 3, col 0) reach past the 6×4 matrix"), std::string::npos) << s.message;
    s = fillGlTextures(r->deviceGeneration, {{30, DeviceMatrix::Scores, 0, -1, 0}});
    EXPECT_EQ(s.code, StatusCode::InvalidArgument);
    EXPECT_EQ(s.message, "fillGlTextures: texture 30: a part's top-left cell must be in the matrix, got (row -1, col 0)");
    s = fillGlTextures(r->deviceGeneration, {{30, DeviceMatrix::Scores, 0, 0, 0}, {30, DeviceMatrix::Scores, 0, 2, 0}});
    EXPECT_EQ(s.code, StatusCode::InvalidArgument);
    EXPECT_EQ(s.message, "fillGlTextures: GL texture 30 comes twice in one batch (each texture takes one part)");
    s = fillGlTextures(r->deviceGeneration, {{30, DeviceMatrix::Scores, 2, 0, 0}});
    EXPECT_EQ(s.code, StatusCode::InvalidArgument);
    EXPECT_EQ(s.message, "fillGlTextures: head: expected 0…1, got 2");
    EXPECT_TRUE(untouched(30));
    // The same batch, made right, fills both.
    s = fillGlTextures(r->deviceGeneration, {{30, DeviceMatrix::Weights, 1, 0, 0}, {31, DeviceMatrix::Weights, 1, 2, 3}});
    ASSERT_TRUE(s.ok()) << s.message;
    EXPECT_TRUE(samePart(30, r->heads[1].weights, 0, 0, "first part"));
    EXPECT_TRUE(samePart(31, r->heads[1].weights, 2, 3, "second part"));
    // A later compute: the batch is refused as a single fill is.
    test::ProblemSpec q = twoHeads();
    q.seed = 3;
    Expected<AttentionResult> later = computeOnDevice(q);
    ASSERT_TRUE(later.ok()) << later.status().message;
    s = fillGlTextures(r->deviceGeneration, {{30, DeviceMatrix::Weights, 1, 0, 0}});
    EXPECT_EQ(s.code, StatusCode::Unavailable);
    EXPECT_EQ(s.message.rfind("fillGlTextures: the device no longer holds result generation ", 0), 0u) << s.message;
}

TEST(GlInteropAvailability, NeedsTheGlContextOnTheComputeDevice)
{
    std::string why;
    emu::glContextOnDevice = true;
    EXPECT_TRUE(deviceInteropAvailable(&why));
    EXPECT_EQ(why, "CPU emulation of the CUDA kernels (tests/parity/emulated)");  // the device's description
    emu::glContextOnDevice = false;
    EXPECT_FALSE(deviceInteropAvailable(&why));
    EXPECT_EQ(why.rfind("the current OpenGL context is not on a CUDA device (cudaGLGetDevices: ", 0), 0u) << why;
    emu::glContextOnDevice = true;
}

} // namespace
} // namespace attn

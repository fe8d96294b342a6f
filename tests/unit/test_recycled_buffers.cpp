// RecycledBuffers (attnscope/recycled_buffers.h): a buffer given is taken back whole (its storage, not a copy) by the
// next take of its exact shape; small ones and ones over the capacity are left to the caller; over the capacity the
// oldest go first and come back to be freed; dropBefore(mark) returns what was given before the mark; LazyLayer's
// adopted buffers with `recycle` come here when their last holder goes, and never while one holds them.
#include <attnscope/lazy_attention.h>
#include <attnscope/recycled_buffers.h>

#include <gtest/gtest.h>

namespace attn {
namespace {

class RecycledBuffersTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        (void)pool.clear();
        savedMin = pool.minBytes();
        savedCapacity = pool.capacity();
        pool.setMinBytes(64);
        pool.setCapacity(1000);
    }
    void TearDown() override
    {
        (void)pool.clear();
        pool.setMinBytes(savedMin);
        pool.setCapacity(savedCapacity);
    }
    RecycledBuffers& pool = RecycledBuffers::instance();
    std::size_t savedMin = 0, savedCapacity = 0;
};

Matrix filled(int rows, int cols, float v) { return Matrix::Constant(rows, cols, v); }

TEST_F(RecycledBuffersTest, ABufferGivenIsTakenBackWholeByItsExactShape)
{
    Matrix a = filled(4, 8, 1.0f);  // 128 bytes
    const float* storage = a.data();
    EXPECT_TRUE(pool.give(a).empty());
    EXPECT_EQ(a.size(), 0) << "given: the caller's matrix is left empty";
    EXPECT_EQ(pool.count(), 1u);
    EXPECT_EQ(pool.bytes(), 128u);
    EXPECT_EQ(pool.take(8, 4).size(), 0) << "the transposed shape is another";
    EXPECT_EQ(pool.take(4, 7).size(), 0);
    const long before = pool.taken();
    Matrix b = pool.take(4, 8);
    EXPECT_EQ(b.data(), storage) << "the same storage, not a copy";
    EXPECT_EQ(b(3, 7), 1.0f) << "with its old values";
    EXPECT_EQ(pool.taken(), before + 1);
    EXPECT_EQ(pool.count(), 0u);
    EXPECT_EQ(pool.bytes(), 0u);
    EXPECT_EQ(pool.take(4, 8).size(), 0) << "taken once";
}

TEST_F(RecycledBuffersTest, SmallOrTooLargeBuffersAreLeftToTheCaller)
{
    Matrix small = filled(3, 5, 0.0f);  // 60 bytes < 64
    EXPECT_TRUE(pool.give(small).empty());
    EXPECT_EQ(small.size(), 15) << "not kept: still the caller's";
    Matrix large = filled(16, 16, 0.0f);  // 1024 bytes > 1000
    EXPECT_TRUE(pool.give(large).empty());
    EXPECT_EQ(large.size(), 256);
    Matrix empty;
    EXPECT_TRUE(pool.give(empty).empty());
    EXPECT_EQ(pool.count(), 0u);
}

TEST_F(RecycledBuffersTest, OverTheCapacityTheOldestComeBackToBeFreed)
{
    std::vector<const float*> given;
    for (int i = 0; i < 3; ++i) {  // 3 × 400 bytes against 1000
        Matrix m = filled(10, 10, float(i));
        given.push_back(m.data());
        std::vector<Matrix> out = pool.give(m);
        if (i < 2) {
            EXPECT_TRUE(out.empty()) << i;
        } else {
            ASSERT_EQ(out.size(), 1u);
            EXPECT_EQ(out[0].data(), given[0]) << "the oldest";
            EXPECT_EQ(out[0](0, 0), 0.0f);
        }
    }
    EXPECT_EQ(pool.bytes(), 800u);
    EXPECT_EQ(pool.take(10, 10).data(), given[2]) << "the newest first";
    EXPECT_EQ(pool.take(10, 10).data(), given[1]);
}

TEST_F(RecycledBuffersTest, DropBeforeAMarkReturnsWhatCameBeforeIt)
{
    Matrix a = filled(4, 4, 1.0f), b = filled(2, 8, 2.0f), c = filled(4, 4, 3.0f);  // 64 bytes each
    const float* bs = b.data();
    const float* cs = c.data();
    (void)pool.give(a);
    (void)pool.give(b);
    const std::uint64_t mark = pool.mark();
    (void)pool.give(c);
    const std::vector<Matrix> dropped = pool.dropBefore(mark);
    ASSERT_EQ(dropped.size(), 2u);
    EXPECT_EQ(dropped[1].data(), bs);
    EXPECT_EQ(pool.count(), 1u);
    EXPECT_EQ(pool.take(4, 4).data(), cs) << "given after the mark: kept";
    EXPECT_TRUE(pool.dropBefore(pool.mark()).empty());
}

TEST_F(RecycledBuffersTest, AdoptedLazyBuffersComeWhenTheLastHolderGoes)
{
    Matrix Q = filled(6, 4, 1.0f), K = filled(6, 4, 2.0f), lse = filled(6, 4, 3.0f), V = filled(6, 4, 4.0f);  // 96 bytes each
    auto layer = LazyLayer::adopt(std::move(Q), std::move(K), std::move(lse), std::move(V), 5, /*recycle=*/true);
    std::shared_ptr<const LazyLayer> view = layer->truncated(3);  // another holder of the same buffers
    layer.reset();
    EXPECT_EQ(pool.count(), 0u) << "a view still holds them";
    EXPECT_EQ(view->Q(2, 3), 1.0f);
    view.reset();
    EXPECT_EQ(pool.count(), 4u) << "Q, K, lse and V, when the last view went";
    EXPECT_EQ(pool.take(6, 4).size(), 24);
    (void)pool.clear();
    // Without `recycle` (the CPU's lazy layers): freed as before.
    auto plain = LazyLayer::adopt(filled(6, 4, 1.0f), filled(6, 4, 2.0f), filled(6, 4, 3.0f), filled(6, 4, 4.0f), 5);
    plain.reset();
    EXPECT_EQ(pool.count(), 0u);
}

} // namespace
} // namespace attn

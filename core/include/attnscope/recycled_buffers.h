// Large host buffers kept for the next result of the same shape, their pages still mapped.
//
// A decoder forward on the GPU brings 1.3-1.6 GB back to the host at 8192 tokens. Copied into fresh buffers, every
// page is mapped by the kernel as the copies first touch it: on the H100's host the copies of an 8192-token SmolLM2
// forward ended 56 ms after the LM head (loan 2 of docs/gpu.md), 1.5 ms when the pages had been touched before
// (loan 3); and the run they replace hands as much memory back. So the buffers of a replaced device run are kept
// here, and the next device forward copies into those of the shapes it needs: a recompute after an edit (an
// ablation, a W^O cell) keeps its shapes. At most one replaced run's worth is held between calls (the decoder drops
// what a forward did not take), and nothing below kMinBytes; buffers of CPU runs never come here.
#pragma once

#include "attnscope/types.h"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

namespace attn {

class RecycledBuffers {
public:
    // The process's pool (never destroyed: what it holds at exit is the system's to free).
    static RecycledBuffers& instance();

    // Buffers smaller than this are not kept (mapping them is cheap). Default 1 MiB; the tests lower it so that
    // their small runs go through the pool.
    void setMinBytes(std::size_t bytes);
    // At most this many bytes are held; the oldest go first. Default: an eighth of the machine's memory, at most 4 GiB.
    void setCapacity(std::size_t bytes);

    // Keeps `m`'s storage (and contents) for a later take(), leaving `m` empty; or leaves `m` as it is when it is
    // smaller than the minimum or larger than the capacity. Buffers it pushes out over the capacity are returned,
    // for the caller to free where it likes.
    std::vector<Matrix> give(Matrix& m);
    // A kept buffer of exactly rows × cols (the last given of them; its contents are old values), or an empty Matrix.
    Matrix take(Eigen::Index rows, Eigen::Index cols);
    // A mark of what has been given so far; dropBefore(mark) returns (to be freed) every buffer given before it that
    // is still held.
    std::uint64_t mark() const;
    std::vector<Matrix> dropBefore(std::uint64_t mark);
    std::vector<Matrix> clear();

    std::size_t minBytes() const;
    std::size_t capacity() const;
    std::size_t bytes() const;
    std::size_t count() const;
    long taken() const;  // take() calls that returned a buffer, since the start

private:
    RecycledBuffers();
    struct Held {
        std::uint64_t serial;
        Matrix m;
    };
    mutable std::mutex m_mutex;
    std::deque<Held> m_held;  // oldest first
    std::size_t m_bytes = 0, m_minBytes = std::size_t(1) << 20, m_capacity = 0;
    std::uint64_t m_serial = 0;
    long m_taken = 0;
};

} // namespace attn

// attnscope/recycled_buffers.h: a FIFO of whole Eigen buffers under one mutex; a take scans from the newest (a run's
// few hundred buffers, of a handful of shapes: the scan is short beside the copies it saves).
#include "attnscope/recycled_buffers.h"

#include <algorithm>
#include <unistd.h>

namespace attn {

namespace {

std::size_t bytesOf(const Matrix& m) { return static_cast<std::size_t>(m.size()) * sizeof(float); }

std::size_t defaultCapacity()
{
    constexpr std::size_t kMax = std::size_t(4) << 30;
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page <= 0) return std::size_t(1) << 30;
    return std::min(kMax, static_cast<std::size_t>(pages) * static_cast<std::size_t>(page) / 8);
}

} // namespace

RecycledBuffers::RecycledBuffers() : m_capacity(defaultCapacity()) {}

RecycledBuffers& RecycledBuffers::instance()
{
    static auto* pool = new RecycledBuffers;  // never destroyed: a buffer given during exit's destructors is still kept
    return *pool;
}

void RecycledBuffers::setMinBytes(std::size_t bytes)
{
    std::lock_guard<std::mutex> lock(m_mutex);
    m_minBytes = bytes;
}

void RecycledBuffers::setCapacity(std::size_t bytes)
{
    std::lock_guard<std::mutex> lock(m_mutex);
    m_capacity = bytes;
}

std::vector<Matrix> RecycledBuffers::give(Matrix& m)
{
    std::vector<Matrix> out;
    const std::size_t b = bytesOf(m);
    std::lock_guard<std::mutex> lock(m_mutex);
    if (m.size() == 0 || b < m_minBytes || b > m_capacity) return out;
    while (!m_held.empty() && m_bytes + b > m_capacity) {
        m_bytes -= bytesOf(m_held.front().m);
        out.push_back(std::move(m_held.front().m));
        m_held.pop_front();
    }
    m_held.push_back({m_serial++, std::move(m)});
    m_bytes += b;
    m = Matrix();
    return out;
}

Matrix RecycledBuffers::take(Eigen::Index rows, Eigen::Index cols)
{
    std::lock_guard<std::mutex> lock(m_mutex);
    for (auto it = m_held.rbegin(); it != m_held.rend(); ++it)
        if (it->m.rows() == rows && it->m.cols() == cols) {
            Matrix out = std::move(it->m);
            m_bytes -= bytesOf(out);
            m_held.erase(std::next(it).base());
            ++m_taken;
            return out;
        }
    return Matrix();
}

std::uint64_t RecycledBuffers::mark() const
{
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_serial;
}

std::vector<Matrix> RecycledBuffers::dropBefore(std::uint64_t mark)
{
    std::vector<Matrix> out;
    std::lock_guard<std::mutex> lock(m_mutex);
    while (!m_held.empty() && m_held.front().serial < mark) {
        m_bytes -= bytesOf(m_held.front().m);
        out.push_back(std::move(m_held.front().m));
        m_held.pop_front();
    }
    return out;
}

std::vector<Matrix> RecycledBuffers::clear() { return dropBefore(~std::uint64_t(0)); }

std::size_t RecycledBuffers::minBytes() const
{
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_minBytes;
}

std::size_t RecycledBuffers::capacity() const
{
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_capacity;
}

std::size_t RecycledBuffers::bytes() const
{
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_bytes;
}

std::size_t RecycledBuffers::count() const
{
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_held.size();
}

long RecycledBuffers::taken() const
{
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_taken;
}

} // namespace attn

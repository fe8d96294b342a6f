// A read-only memory mapping of a whole file (core/model, private): the bytes stay on disk and are paged in as
// they are read, so a file larger than memory can be opened. Shared: readers keep the mapping alive by holding
// the shared_ptr; it is unmapped when the last one goes.
#pragma once

#include "attnscope/status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace attn {

class MappedFile {
public:
    // Maps `path` read-only. IoError naming the path when it is missing, unreadable, a directory or not a
    // regular file (a pipe is refused without waiting for a writer), or when the mapping fails; `expected`
    // finishes the not-a-file message, e.g. "expected a .safetensors bundle". An empty file maps to size 0.
    static Expected<std::shared_ptr<const MappedFile>> open(const std::string& path, const std::string& expected);

    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile();

    const std::uint8_t* data() const { return static_cast<const std::uint8_t*>(m_addr); }
    std::size_t size() const { return m_size; }

private:
    MappedFile() = default;
    void* m_addr = nullptr;
    std::size_t m_size = 0;
};

} // namespace attn

// Read-only whole-file mappings (mapped_file.h).
#include "mapped_file.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace attn {

MappedFile::~MappedFile()
{
    if (m_addr) ::munmap(m_addr, m_size);
}

Expected<std::shared_ptr<const MappedFile>> MappedFile::open(const std::string& path, const std::string& expected)
{
    // O_NONBLOCK: opening a named pipe must not wait for a writer; fstat on the descriptor says what it is.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return makeError(StatusCode::IoError, path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const std::string why = std::strerror(errno);
        ::close(fd);
        return makeError(StatusCode::IoError, path + ": cannot examine: " + why);
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        return makeError(StatusCode::IoError,
                         path + (S_ISDIR(st.st_mode) ? ": is a directory" : ": is not a regular file") + ", " + expected);
    }
    std::shared_ptr<MappedFile> f(new MappedFile);
    const std::size_t size = static_cast<std::size_t>(st.st_size);
    if (size > 0) {
        void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (addr == MAP_FAILED) {
            const std::string why = std::strerror(errno);
            ::close(fd);
            return makeError(StatusCode::IoError, path + ": cannot map " + std::to_string(size) + " bytes: " + why);
        }
        f->m_addr = addr;
        f->m_size = size;
    }
    ::close(fd);  // the mapping stays valid
    return std::shared_ptr<const MappedFile>(std::move(f));
}

} // namespace attn

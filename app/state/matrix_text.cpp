#include "state/matrix_text.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

namespace app {
namespace {

bool isNumberChar(char c) { return (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E'; }

std::string trim(std::string_view s)
{
    std::size_t a = 0, b = s.size();
    while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
    while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
    return std::string(s.substr(a, b - a));
}

} // namespace

attn::Expected<float> parseCellValue(std::string_view text)
{
    const std::string t = trim(text);
    if (t.empty()) return attn::invalidArgument("empty value: type a number");
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(t.c_str(), &end);
    if (end == t.c_str() || *end != '\0') return attn::invalidArgument("'" + t + "' is not a number");
    if (std::isnan(v)) return attn::invalidArgument("NaN is not allowed: type a finite number");
    if (std::isinf(v) || std::fabs(v) > 3.4028234e38) return attn::invalidArgument("'" + t + "' is out of the float range");
    return static_cast<float>(v);
}

attn::Expected<attn::Matrix> parseMatrixText(std::string_view textIn)
{
    std::string text(textIn);
    // Drop the NumPy/PyTorch wrappers: everything from "dtype=", "device=", "requires_grad=" or "grad_fn=".
    for (const char* key : {"dtype=", "device=", "requires_grad=", "grad_fn="}) {
        const auto p = text.find(key);
        if (p != std::string::npos) text.erase(p);
    }
    for (const char* key : {"tensor(", "array(", "matrix("}) {
        const auto p = text.find(key);
        if (p != std::string::npos) text.erase(p, std::char_traits<char>::length(key));
    }
    // Row boundaries: "]" followed by "," or whitespace then "[" (nested lists), or a newline outside brackets.
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> row;
    std::string tok;
    int depth = 0;
    auto flushTok = [&] {
        if (!tok.empty()) row.push_back(tok);
        tok.clear();
    };
    auto flushRow = [&] {
        flushTok();
        if (!row.empty()) rows.push_back(row);
        row.clear();
    };
    for (char c : text) {
        if (c == '[') {
            flushTok();
            ++depth;
        } else if (c == ']') {
            flushTok();
            if (depth > 0) --depth;
            flushRow();
        } else if (c == '\n' || c == ';') {
            // In a bracketed printout, newlines are only wrapping; rows end at "]".
            if (depth == 0) flushRow();
            else flushTok();
        } else if (c == ',' || c == '\t' || c == ' ' || c == '\r' || c == '(' || c == ')') {
            flushTok();
        } else {
            tok.push_back(c);
        }
    }
    flushRow();
    if (rows.empty()) return attn::invalidArgument("paste: no numbers found in the clipboard text");
    const std::size_t cols = rows[0].size();
    attn::Matrix m(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(cols));
    for (std::size_t r = 0; r < rows.size(); ++r) {
        if (rows[r].size() != cols)
            return attn::invalidArgument("paste: row " + std::to_string(r + 1) + " has " + std::to_string(rows[r].size()) +
                                         " values, row 1 has " + std::to_string(cols));
        for (std::size_t c = 0; c < cols; ++c) {
            std::string t = rows[r][c];
            // "1." (NumPy) is fine for strtod; a trailing "," was removed above.
            bool numeric = !t.empty();
            for (char ch : t) numeric = numeric && isNumberChar(ch);
            auto v = parseCellValue(t);
            if (!numeric || !v.ok())
                return attn::invalidArgument("paste: row " + std::to_string(r + 1) + ", value " + std::to_string(c + 1) +
                                             ": '" + t + "' is not a finite number");
            m(static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(c)) = *v;
        }
    }
    return m;
}

std::string matrixToCsv(const attn::Matrix& m)
{
    std::string out;
    char buf[32];
    for (Eigen::Index r = 0; r < m.rows(); ++r) {
        for (Eigen::Index c = 0; c < m.cols(); ++c) {
            std::snprintf(buf, sizeof buf, "%.7g", static_cast<double>(m(r, c)));
            if (c) out += ", ";
            out += buf;
        }
        out += "\n";
    }
    return out;
}

} // namespace app

// A small JSON reader for RFC 6901 pointers over the raw record value: it validates the whole
// text, then walks to the pointed-at value, skipping everything else. Iterative where the input
// decides the depth would be unbounded; nesting beyond max_json_depth counts as invalid.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "seqinbox/yaml/builtin.hpp"

namespace seqinbox::yaml {

namespace {

constexpr std::size_t max_json_depth = 512;

class json_reader {
public:
    explicit json_reader(std::string_view text) : text_(text) {}

    bool at_end() {
        skip_ws();
        return pos_ == text_.size();
    }

    /// Validates one value and moves past it.
    bool skip_value(std::size_t depth = 0) {
        skip_ws();
        if (pos_ == text_.size()) return false;
        switch (text_[pos_]) {
        case '{': return skip_container('}', depth);
        case '[': return skip_container(']', depth);
        case '"': return read_string(nullptr);
        case 't': return literal("true");
        case 'f': return literal("false");
        case 'n': return literal("null");
        default: return skip_number();
        }
    }

    /// Reads a string at the current position into `out` (unescaped, UTF-8); `out` may be null.
    bool read_string(std::string* out) {
        if (!consume('"')) return false;
        while (pos_ < text_.size()) {
            const char c = text_[pos_++];
            if (c == '"') return true;
            if (static_cast<unsigned char>(c) < 0x20) return false;
            if (c != '\\') {
                if (out) out->push_back(c);
                continue;
            }
            if (pos_ == text_.size()) return false;
            const char e = text_[pos_++];
            char plain = 0;
            switch (e) {
            case '"': plain = '"'; break;
            case '\\': plain = '\\'; break;
            case '/': plain = '/'; break;
            case 'b': plain = '\b'; break;
            case 'f': plain = '\f'; break;
            case 'n': plain = '\n'; break;
            case 'r': plain = '\r'; break;
            case 't': plain = '\t'; break;
            case 'u': {
                std::uint32_t cp = 0;
                if (!read_code_point(cp)) return false;
                if (out) append_utf8(*out, cp);
                continue;
            }
            default: return false;
            }
            if (out) out->push_back(plain);
        }
        return false;
    }

    /// The literal text of the number, `true` or `false` at the current position (validated).
    std::optional<std::string> read_scalar_text() {
        skip_ws();
        const std::size_t start = pos_;
        if (pos_ < text_.size() && text_[pos_] == 'n') return std::nullopt;  // null: no value
        if (pos_ < text_.size() && (text_[pos_] == 't' || text_[pos_] == 'f' || text_[pos_] == '-' ||
                                    (text_[pos_] >= '0' && text_[pos_] <= '9'))) {
            if (!skip_value()) return std::nullopt;
            return std::string(text_.substr(start, pos_ - start));
        }
        return std::nullopt;
    }

    char peek() {
        skip_ws();
        return pos_ < text_.size() ? text_[pos_] : '\0';
    }
    bool consume(char c) {
        skip_ws();
        if (pos_ < text_.size() && text_[pos_] == c) {
            ++pos_;
            return true;
        }
        return false;
    }

private:
    void skip_ws() {
        while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
            ++pos_;
    }

    bool literal(std::string_view word) {
        if (text_.substr(pos_, word.size()) != word) return false;
        pos_ += word.size();
        return true;
    }

    bool digits() {
        const std::size_t start = pos_;
        while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
        return pos_ > start;
    }

    // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
    bool skip_number() {
        if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
        if (pos_ < text_.size() && text_[pos_] == '0') ++pos_;
        else if (!digits()) return false;
        if (pos_ < text_.size() && text_[pos_] == '.') {
            ++pos_;
            if (!digits()) return false;
        }
        if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
            ++pos_;
            if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
            if (!digits()) return false;
        }
        return true;
    }

    bool skip_container(char close, std::size_t depth) {
        if (depth >= max_json_depth) return false;
        ++pos_;  // the opening bracket
        if (consume(close)) return true;
        do {
            if (close == '}' && (!read_string_ws() || !consume(':'))) return false;
            if (!skip_value(depth + 1)) return false;
        } while (consume(','));
        return consume(close);
    }

    bool read_string_ws() {
        skip_ws();
        return read_string(nullptr);
    }

    bool hex4(std::uint32_t& value) {
        if (text_.size() - pos_ < 4) return false;
        value = 0;
        for (int i = 0; i < 4; ++i) {
            const char h = text_[pos_++];
            value <<= 4;
            if (h >= '0' && h <= '9') value |= static_cast<std::uint32_t>(h - '0');
            else if (h >= 'a' && h <= 'f') value |= static_cast<std::uint32_t>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F') value |= static_cast<std::uint32_t>(h - 'A' + 10);
            else return false;
        }
        return true;
    }

    // After `\u`: one code unit, or a surrogate pair written as two escapes; lone surrogates are invalid.
    bool read_code_point(std::uint32_t& cp) {
        if (!hex4(cp)) return false;
        if (cp >= 0xDC00 && cp <= 0xDFFF) return false;
        if (cp < 0xD800 || cp > 0xDBFF) return true;
        std::uint32_t low = 0;
        if (!literal("\\u") || !hex4(low) || low < 0xDC00 || low > 0xDFFF) return false;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        return true;
    }

    static void append_utf8(std::string& out, std::uint32_t cp) {
        if (cp < 0x80) {
            out.push_back(static_cast<char>(cp));
        } else if (cp < 0x800) {
            out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        } else if (cp < 0x10000) {
            out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        } else {
            out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        }
    }

    std::string_view text_;
    std::size_t pos_ = 0;
};

/// The reference tokens of a valid pointer, unescaped (`~1` is `/`, `~0` is `~`).
std::vector<std::string> tokens_of(std::string_view pointer) {
    std::vector<std::string> tokens;
    for (std::size_t i = 0; i < pointer.size(); ++i) {
        if (pointer[i] == '/') {
            tokens.emplace_back();
        } else if (pointer[i] == '~') {
            tokens.back().push_back(pointer[++i] == '1' ? '/' : '~');
        } else {
            tokens.back().push_back(pointer[i]);
        }
    }
    return tokens;
}

/// An array index token: `0` or digits without a leading zero (`-`, the end, points at nothing).
std::optional<std::size_t> array_index(const std::string& token) {
    if (token.empty() || token.size() > 9 || (token.size() > 1 && token[0] == '0')) return std::nullopt;
    std::size_t n = 0;
    for (char c : token) {
        if (c < '0' || c > '9') return std::nullopt;
        n = n * 10 + static_cast<std::size_t>(c - '0');
    }
    return n;
}

/// Moves `r` (at an object) to the value of member `token`; false when there is none.
bool enter_member(json_reader& r, const std::string& token) {
    r.consume('{');
    if (r.consume('}')) return false;
    do {
        std::string name;
        if (r.peek() != '"' || !r.read_string(&name) || !r.consume(':')) return false;
        if (name == token) return true;
        if (!r.skip_value()) return false;
    } while (r.consume(','));
    return false;
}

/// Moves `r` (at an array) to element `token`; false when there is none.
bool enter_element(json_reader& r, const std::string& token) {
    const auto index = array_index(token);
    if (!index) return false;
    r.consume('[');
    if (r.consume(']')) return false;
    for (std::size_t i = 0;; ++i) {
        if (i == *index) return true;
        if (!r.skip_value() || !r.consume(',')) return false;
    }
}

}  // namespace

std::string json_pointer_problem(std::string_view pointer) {
    if (!pointer.empty() && pointer.front() != '/')
        return "a JSON pointer is empty or starts with '/' (RFC 6901), not '" + std::string(pointer) + "'";
    for (std::size_t i = 0; i < pointer.size(); ++i)
        if (pointer[i] == '~' && (i + 1 == pointer.size() || (pointer[i + 1] != '0' && pointer[i + 1] != '1')))
            return "in a JSON pointer '~' must be followed by '0' or '1' (column " + std::to_string(i + 1) + " of '" +
                   std::string(pointer) + "')";
    return {};
}

std::optional<std::string> json_pointer_value(std::string_view json, std::string_view pointer) {
    if (!json_pointer_problem(pointer).empty()) return std::nullopt;
    {
        json_reader whole(json);  // the payload must be valid JSON as a whole
        if (!whole.skip_value() || !whole.at_end()) return std::nullopt;
    }
    json_reader r(json);
    for (const auto& token : tokens_of(pointer)) {
        const char c = r.peek();
        if (c == '{' ? !enter_member(r, token) : c == '[' ? !enter_element(r, token) : true) return std::nullopt;
    }
    if (r.peek() == '"') {
        std::string text;
        if (!r.read_string(&text)) return std::nullopt;
        return text;
    }
    return r.read_scalar_text();
}

}  // namespace seqinbox::yaml

// A command line's words as a POSIX shell splits what app's ShellQuote writes: bare words, and
// '...' with '\'' for a quote inside (a backslash escapes the next character). Shared by the
// session tests and the flags fuzzer, which both parse a written command line back.
#pragma once

#include <string>
#include <vector>

namespace tests {

inline std::vector<std::string> ShellWords(const std::string& line) {
    std::vector<std::string> words;
    std::string word;
    bool in_word = false, quoted = false, escaped = false;
    for (char c : line) {
        if (escaped) {
            word += c;
            escaped = false;
        } else if (quoted) {
            if (c == '\'') quoted = false;
            else word += c;
        } else if (c == '\'' || c == '\\') {
            (c == '\'' ? quoted : escaped) = true;
            in_word = true;
        } else if (c == ' ') {
            if (in_word) words.push_back(word);
            word.clear();
            in_word = false;
        } else {
            word += c;
            in_word = true;
        }
    }
    if (in_word) words.push_back(word);
    return words;
}

}  // namespace tests

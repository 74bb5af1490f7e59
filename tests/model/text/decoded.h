// Decode's text for EXPECT_EQ: a failure becomes a string that says so, so the comparison fails
// showing the error instead of reading a value that is not there.
#pragma once

#include <string>
#include <vector>

#include "model/text/tokenizer.h"

inline std::string Decoded(const model::Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
    auto text = tokenizer.Decode(ids);
    return text.ok() ? *text : "<Decode failed: " + text.error() + ">";
}

// Result<T>: the value of an operation that can fail in an expected way (bad file, wrong shape,
// text too long). The error is one line naming the file, tensor and numbers involved.
// Programmer errors are asserts; library code never exits.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace model {

struct Error {
    std::string message;
};

template <class T>
class [[nodiscard]] Result {
public:
    Result(T value) : m_value(std::move(value)) {}
    Result(Error error) : m_error(std::move(error.message)) {}

    bool ok() const { return m_value.has_value(); }
    explicit operator bool() const { return ok(); }
    const std::string& error() const { assert(!ok()); return m_error; }

    T& value() & { assert(ok()); return *m_value; }
    const T& value() const& { assert(ok()); return *m_value; }
    T&& value() && { assert(ok()); return std::move(*m_value); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }

private:
    std::optional<T> m_value;
    std::string m_error;
};

// For operations with no value to return.
struct Ok {};
using Status = Result<Ok>;

inline Error Fail(std::string message) { return Error{std::move(message)}; }

}  // namespace model

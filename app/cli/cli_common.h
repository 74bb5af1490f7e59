// What the command line's subcommands share: their failure type and flag parsing.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "app/cli/cli.h"

namespace app {

struct Failure {
    int code;
    std::string message;
};

// --flag value pairs and bare --switches, checked against what the command accepts.
class Flags {
public:
    Flags(const std::vector<std::string>& args, size_t first, const std::set<std::string>& with_value,
          const std::set<std::string>& switches) {
        for (size_t i = 1; i < args.size(); ++i) {
            const bool quote = args[i].find_first_of(" \t'\"$") != std::string::npos;
            m_command += " " + (quote ? "'" + args[i] + "'" : args[i]);
        }
        m_command = "ssaviz" + m_command;
        for (size_t i = first; i < args.size(); ++i) {
            const std::string& a = args[i];
            if (with_value.count(a)) {
                if (i + 1 >= args.size()) throw Failure{kExitUsage, a + " needs a value"};
                m_values[a] = args[++i];
            } else if (switches.count(a)) {
                m_values[a] = "";
            } else if (a == "--help" || a == "-h") {
                m_values["--help"] = "";
            } else {
                throw Failure{kExitUsage, "unknown argument '" + a + "'"};
            }
        }
    }
    bool Has(const std::string& k) const { return m_values.count(k) != 0; }
    std::string Get(const std::string& k, const std::string& fallback = "") const {
        auto it = m_values.find(k);
        return it == m_values.end() ? fallback : it->second;
    }

    const std::string& CommandLine() const { return m_command; }  // as typed (for records)

private:
    std::map<std::string, std::string> m_values;
    std::string m_command;
};

// A progress bar on stderr: redrawn in place on a terminal; on a pipe or log, one line per tenth.
class ProgressBar {
public:
    explicit ProgressBar(std::string what, size_t label_width = 48)
        : m_what(std::move(what)), m_tty(isatty(fileno(stderr)) != 0), m_label_width(label_width) {}
    ~ProgressBar() {
        if (m_tty && m_drawn) std::fprintf(stderr, "\n");
    }

    void Update(size_t done, size_t total, const std::string& label) {
        const int tenth = total ? static_cast<int>(done * 10 / total) : 10;
        if (!m_tty && tenth == m_last_tenth) return;
        m_last_tenth = tenth;
        constexpr int kWidth = 24;
        const int filled = total ? static_cast<int>(done * kWidth / total) : kWidth;
        std::string bar = "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "]";
        std::string shown = label.size() > m_label_width ? "..." + label.substr(label.size() - (m_label_width - 3)) : label;
        shown.resize(std::max(shown.size(), m_tty ? m_label_width : 0), ' ');
        std::fprintf(stderr, m_tty ? "\r%s %s %zu/%zu %s" : "%s %s %zu/%zu %s\n", m_what.c_str(), bar.c_str(), done, total, shown.c_str());
        std::fflush(stderr);
        m_drawn = true;
    }

private:
    std::string m_what;
    bool m_tty;
    size_t m_label_width;
    bool m_drawn = false;
    int m_last_tenth = -1;
};

inline int ParsePositive(const Flags& flags, const std::string& name, int fallback) {
    if (!flags.Has(name)) return fallback;
    const std::string text = flags.Get(name);  // Get returns a copy: keep it alive for *end
    char* end = nullptr;
    long v = std::strtol(text.c_str(), &end, 10);
    if (*end != '\0' || v <= 0 || v > 1 << 20) throw Failure{kExitUsage, name + " must be a positive integer"};
    return static_cast<int>(v);
}

int CmdTrain(const Flags& flags);  // cli_train.cpp
int CmdEval(const Flags& flags);

}  // namespace app

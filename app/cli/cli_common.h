// What the command line's subcommands share: their failure type and progress bar. Their flags are
// app/export/flags.h's.
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <unistd.h>

#include "app/cli/cli.h"
#include "app/export/flags.h"
#include "model/io/files.h"

namespace app {

struct Failure {
    int code;
    std::string message;
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
        const std::string inert = model::EscapeForMessage(label, 4096);  // a step's or twin's file name: control characters written out
        std::string shown = inert.size() > m_label_width ? "..." + inert.substr(inert.size() - (m_label_width - 3)) : inert;
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

// cli_run.cpp: `export --run DIR`, the options and text already read.
int CmdExportRun(const CommandOptions& o, const ExportOptions& options, const std::string& text);

// cli_train.cpp. `typed`: the command line as typed, recorded in train.json.
int CmdTrain(const CommandOptions& options, const std::string& typed);
int CmdEval(const CommandOptions& options);

}  // namespace app
